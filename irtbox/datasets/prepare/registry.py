"""The facts about every dataset a shipped config reads: where its files are published, their
checksums (where one is published, and who publishes it), their sizes, the layout they unpack
into, the published counts per split and the terms of use. Data only: the code that acts on
it is :mod:`.prepare` and :mod:`.check`.

Sizes marked ``approx=True`` are not published; they are estimates for the disk-space check
and the download-time column of docs/datasets.md. Every file without a published checksum is
recorded (size and sha256) at its first download in ``<root>/irtbox_prepare.json``.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

__all__ = ['RemoteFile', 'CountView', 'DatasetInfo', 'DATASETS', 'dataset_info',
           'MANIFEST_NAME', 'GB']

GB = 10**9
MANIFEST_NAME = 'irtbox_prepare.json'  # written in the dataset root by prepare


@dataclass(frozen=True)
class RemoteFile:
    """One published file and where its content goes under the dataset root.

    Attributes:
        name: The file name (also its name on a ``--mirror`` and in ``--from-dir``).
        url: The official address; empty for files behind a form or terms (manual).
        md5 / sha256: The published checksum, if any; ``checksum_source`` says who publishes it.
        md5_url: A published file holding the md5 (its first word), fetched first (GLDv2).
        size: Bytes to download (``approx`` when not published).
        unpacked: Bytes on disk after unpacking.
        unpack: ``'tar'`` (any compression), ``'zip'`` or ``''`` (placed as it is).
        dest: Folder under the root the file or the archive's content goes to.
        prefix: Only archive members under this folder are kept, without it.
        flatten: Keep only the members' file names (ROxford / RParis archives nest folders).
        include: Shell patterns a member's file name must match (all when empty).
        folder: A folder the user supplies with ``--from-dir`` (images fetched by URL);
            linked into place, never copied.
    """

    name: str
    url: str = ''
    md5: Optional[str] = None
    sha256: Optional[str] = None
    checksum_source: str = ''
    md5_url: Optional[str] = None
    size: int = 0
    unpacked: int = 0
    approx: bool = False
    unpack: str = ''
    dest: str = ''
    prefix: str = ''
    flatten: bool = False
    include: Tuple[str, ...] = ()
    folder: bool = False
    optional: bool = False


@dataclass(frozen=True)
class CountView:
    """What one split of the dataset must count, and the dataset config that reads it.

    ``dataset``: the config (without ``data_root``) of the class a shipped config builds.
    ``images`` / ``classes`` / ``queries`` / ``database``: the published counts (None: not
    published, reported only). ``exact=False``: the counts vary with the copy (URL lists
    with dead links) and a mismatch is reported, not an error.
    """

    name: str
    dataset: dict
    images: Optional[int] = None
    classes: Optional[int] = None
    queries: Optional[int] = None
    database: Optional[int] = None
    exact: bool = True


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset: its files (in the order they are prepared), counts and terms."""

    name: str
    title: str
    homepage: str
    files: Tuple[RemoteFile, ...]
    views: Tuple[CountView, ...]
    terms: str
    default_root: str
    manual: str = ''  # where to get files behind a form or terms, what to accept
    notes: str = ''
    configs: str = ''  # which shipped configs read it
    extra: Dict[str, str] = field(default_factory=dict)

    @property
    def download_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def disk_bytes(self) -> int:
        return sum(f.unpacked or f.size for f in self.files)


_CVGL = 'http://ftp.cs.stanford.edu/cs/cvgl'
_JKRAUSE = 'http://ai.stanford.edu/~jkrause/car196'
_CMP_TRAIN = 'http://cmp.felk.cvut.cz/cnnimageretrieval/data/train'
_REVISITOP = 'http://cmp.felk.cvut.cz/revisitop/data/datasets'
_R1M = 'http://ptak.felk.cvut.cz/revisitop/revisitop1m'
_GLD = 'https://s3.amazonaws.com/google-landmark'
_PML = "pytorch-metric-learning's dataset code (K. Musgrave, an author of the recipe benchmark)"
_FLICKR_TERMS = ('The images come from Flickr and remain their owners\' property; the '
                 'annotations are released for research. Use them for non-commercial research '
                 'and cite the paper.')


def _revisited(name: str, title: str, archives: Tuple[Tuple[str, int], ...], database: int,
               homepage: str) -> DatasetInfo:
    return DatasetInfo(
        name=name, title=title, homepage=homepage,
        files=(RemoteFile(f'gnd_{name}.pkl', f'{_REVISITOP}/{name}/gnd_{name}.pkl',
                          size=500_000, approx=True),
               *(RemoteFile(archive, f'{homepage}/{archive}', size=size, approx=True,
                            unpack='tar', dest='jpg', flatten=True, include=('*.jpg', ))
                 for archive, size in archives)),
        views=(CountView(name, dict(type='RevisitedDataset', dataset_name=name),
                         queries=70, database=database), ),
        terms=_FLICKR_TERMS + ' Revisited annotations: Radenovic et al., CVPR 2018.',
        default_root=f'data/{name}',
        notes=('The images archives hold nested folders; their files are flattened into '
               "jpg/ as the authors' download script does. The revisited ground truth is "
               'the pickle of the revisitop project.'),
        configs='irt/landmarks, dtop')


DATASETS: Dict[str, DatasetInfo] = {d.name: d for d in (
    DatasetInfo(
        name='sop', title='Stanford Online Products',
        homepage='https://cvgl.stanford.edu/projects/lifted_struct/',
        files=(RemoteFile('Stanford_Online_Products.zip', f'{_CVGL}/Stanford_Online_Products.zip',
                          md5='7f73d41a2f44250d4779881525aea32e', checksum_source=_PML,
                          size=int(2.9 * GB), unpacked=int(3.0 * GB), approx=True, unpack='zip',
                          prefix='Stanford_Online_Products'), ),
        views=(CountView('train', dict(type='SOPDataset', split='train'), 59_551, 11_318),
               CountView('test', dict(type='SOPDataset', split='test'), 60_502, 11_316)),
        terms=('Images of eBay product listings collected by Song et al. (CVPR 2016) for '
               'research; no licence file comes with the archive: non-commercial research, '
               'cite the paper.'),
        default_root='data/sop', configs='irt, dml_benchmark'),
    DatasetInfo(
        name='cub', title='CUB-200-2011',
        homepage='https://www.vision.caltech.edu/datasets/cub_200_2011/',
        files=(RemoteFile('CUB_200_2011.tgz',
                          'https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz',
                          md5='97eceeb196236b17998738112f37df78',
                          checksum_source='the CaltechDATA record of the dataset',
                          size=int(1.15 * GB), unpacked=int(1.2 * GB), approx=True,
                          unpack='tar',
                          prefix='CUB_200_2011'), ),
        views=(CountView('train', dict(type='CUBDataset', split='train'), 5_864, 100),
               CountView('test', dict(type='CUBDataset', split='test'), 5_924, 100)),
        terms=('Images from Flickr, copyright their owners; Caltech distributes the dataset '
               'for research. Non-commercial research, cite Wah et al. 2011.'),
        default_root='data/cub', configs='irt, dml_benchmark'),
    DatasetInfo(
        name='cars196', title='Cars196 (Stanford Cars)',
        homepage='https://ai.stanford.edu/~jkrause/cars/car_dataset.html',
        files=(RemoteFile('cars_annos.mat', f'{_JKRAUSE}/cars_annos.mat',
                          md5='b407c6086d669747186bd1d764ff9dbc', checksum_source=_PML,
                          size=400_000, approx=True),
               RemoteFile('car_ims.tgz', f'{_JKRAUSE}/car_ims.tgz',
                          md5='d5c8f0aa497503f355e17dc7886c3f14', checksum_source=_PML,
                          size=int(1.9 * GB), unpacked=int(1.9 * GB), approx=True,
                          unpack='tar')),
        views=(CountView('train', dict(type='Cars196Dataset', split='train'), 8_054, 98),
               CountView('test', dict(type='Cars196Dataset', split='test'), 8_131, 98)),
        terms=('Images collected from the web by Krause et al. (3dRR 2013), distributed for '
               'research under the same terms as ImageNet: non-commercial research only.'),
        default_root='data/cars196', configs='dml_benchmark',
        notes=("The authors' site has been unreachable at times: use --mirror or --from-dir "
               'with the same two files.')),
    DatasetInfo(
        name='inshop', title='DeepFashion In-Shop Clothes Retrieval',
        homepage='https://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html',
        files=(RemoteFile('list_eval_partition.txt', dest='Eval', size=3_000_000, approx=True),
               RemoteFile('img.zip', size=int(1.5 * GB), unpacked=int(1.6 * GB), approx=True,
                          unpack='zip', dest='Img')),
        views=(CountView('train', dict(type='InShopDataset', split='train'), 25_882, 3_997),
               CountView('test', dict(type='InShopDataset', split='test'), 14_218 + 12_612,
                         3_985, queries=14_218, database=12_612)),
        terms=('The DeepFashion agreement: the dataset is available for non-commercial '
               'research and educational purposes only; the images are not owned by CUHK; '
               'you may not redistribute them. You accept it on the download form.'),
        manual=('Fill in the DeepFashion download form (linked from the homepage), accept the '
                "agreement, then from the shared folder 'In-shop Clothes Retrieval Benchmark' "
                'download Img/img.zip and Eval/list_eval_partition.txt into one folder and '
                'pass it as --from-dir.'),
        default_root='data/inshop', configs='irt'),
    DatasetInfo(
        name='inat2018', title='iNaturalist 2018 (retrieval split)',
        homepage='https://github.com/visipedia/inat_comp/tree/master/2018',
        files=(RemoteFile('Inat_dataset_splits.zip',
                          'https://drive.google.com/uc?export=download&id='
                          '1sXfkBTFDrRU3__-NUs1qBP3sf_0uMB98',
                          size=20_000_000, approx=True, unpack='zip', flatten=True,
                          include=('Inaturalist_*_set1.txt', )),
               RemoteFile('train_val2018.tar.gz',
                          'https://ml-inat-competition-datasets.s3.amazonaws.com/2018/'
                          'train_val2018.tar.gz',
                          md5='b1c6952ce38f31868cc50ea72d066cc3',
                          checksum_source='the iNaturalist 2018 competition page (visipedia)',
                          size=120 * GB, unpacked=125 * GB, approx=True, unpack='tar')),
        views=(CountView('train', dict(type='INaturalist2018Dataset', split='train'),
                         325_846, 5_690),
               CountView('test', dict(type='INaturalist2018Dataset', split='test'),
                         136_093, 2_452)),
        terms=('Images uploaded to iNaturalist by its users, each under its own (mostly '
               'Creative Commons) licence; the competition data is for research. The split '
               'files are those of Brown et al. (Smooth-AP, ECCV 2020).'),
        default_root='data/inat2018', configs='dml_benchmark',
        notes=('The split files come from the Smooth-AP authors\' Google Drive link (the '
               'address pytorch-metric-learning uses); Google Drive may ask for a '
               'confirmation on large files: if the download is an HTML page, fetch the zip '
               'in a browser, save it as Inat_dataset_splits.zip beside '
               'train_val2018.tar.gz and use --from-dir.')),
    DatasetInfo(
        name='sfm120k', title='SfM-120k (retrieval-SfM-120k, with its whitening set)',
        homepage='http://cmp.felk.cvut.cz/cnnimageretrieval/',
        files=(RemoteFile('retrieval-SfM-120k.pkl', f'{_CMP_TRAIN}/dbs/retrieval-SfM-120k.pkl',
                          size=10_000_000, approx=True),
               RemoteFile('retrieval-SfM-120k-whiten.pkl',
                          f'{_CMP_TRAIN}/dbs/retrieval-SfM-120k-whiten.pkl',
                          size=10_000_000, approx=True),
               RemoteFile('ims.tar.gz', f'{_CMP_TRAIN}/ims/ims.tar.gz', size=20 * GB,
                          unpacked=20 * GB, approx=True, unpack='tar', dest='ims')),
        views=(CountView('train', dict(type='SfM120kDataset', split='train'), classes=551),
               CountView('val', dict(type='SfM120kDataset', split='val'), classes=162),
               CountView('whiten', dict(type='SfMWhitenDataset'))),
        terms=_FLICKR_TERMS + ' Radenovic et al., TPAMI 2018.',
        default_root='data/sfm120k', configs='irt/landmarks, dtop'),
    _revisited('roxford5k', 'Revisited Oxford5k', (('oxbuild_images-v1.tgz', int(1.8 * GB)), ),
               4_993, 'https://www.robots.ox.ac.uk/~vgg/data/oxbuildings'),
    _revisited('rparis6k', 'Revisited Paris6k', (('paris_1-v1.tgz', int(1.2 * GB)),
                                                  ('paris_2-v1.tgz', int(1.3 * GB))),
               6_322, 'https://www.robots.ox.ac.uk/~vgg/data/parisbuildings'),
    DatasetInfo(
        name='revisitop1m', title='R1M distractors (revisitop1m)',
        homepage='http://ptak.felk.cvut.cz/revisitop/revisitop1m/',
        files=(RemoteFile('revisitop1m.txt', f'{_R1M}/revisitop1m.txt', size=40_000_000,
                          approx=True),
               *(RemoteFile(f'revisitop1m.{k}.tar.gz', f'{_R1M}/jpg/revisitop1m.{k}.tar.gz',
                            size=int(3.5 * GB), approx=True, unpack='tar', dest='jpg')
                 for k in range(1, 101))),
        views=(CountView('distractors', dict(type='R1MList'), images=1_001_001), ),
        terms=('Images from the YFCC100M collection (Flickr, Creative Commons licences of '
               'their owners), selected by Radenovic et al. (CVPR 2018) for research.'),
        default_root='data/revisitop1m', configs='irt/landmarks, dtop (+R1M)',
        notes=('revisitop1m.txt lies beside jpg/ and lists paths relative to jpg/: point a '
               'RevisitedDataset at it with distractors_root=data/revisitop1m/jpg and '
               'distractors_list=../revisitop1m.txt (a relative list is read from '
               'distractors_root).')),
    DatasetInfo(
        name='gldv2clean', title='Google Landmarks Dataset v2, clean training set',
        homepage='https://github.com/cvdfoundation/google-landmark',
        files=(RemoteFile('train_clean.csv', f'{_GLD}/metadata/train_clean.csv',
                          size=30_000_000, approx=True),
               *(RemoteFile(f'images_{k:03d}.tar', f'{_GLD}/train/images_{k:03d}.tar',
                            md5_url=f'{_GLD}/md5sum/train/md5.images_{k:03d}.txt',
                            checksum_source='the md5sum files of the GLDv2 release',
                            size=1 * GB, approx=True, unpack='tar', dest='train')
                 for k in range(500))),
        views=(CountView('train', dict(type='GLDv2CleanDataset'), 1_580_470, 81_313), ),
        terms=('Annotations: CC BY 4.0 (Google). Train images: Creative Commons BY licences '
               'of their owners, listed per image in train_attribution.csv; Google makes no '
               'warranty on the licence of each image.'),
        default_root='data/gldv2clean', configs='dtop',
        notes=('The 500 archives hold the whole GLDv2 train set (4.1M images); the clean '
               'subset reads 1.58M of them.')),
    DatasetInfo(
        name='gldv1noisy', title='Google Landmarks Dataset v1 (Kaggle 2018), noisy training set',
        homepage='https://www.kaggle.com/c/landmark-recognition-challenge',
        files=(RemoteFile('train.csv', size=190_000_000, approx=True),
               RemoteFile('train', folder=True, size=0, unpacked=500 * GB, approx=True,
                          optional=True)),
        views=(CountView('train', dict(type='GLDv1NoisyDataset', skip_missing=True),
                         1_225_029, 14_951, exact=False), ),
        terms=('The rules of the Kaggle "Google Landmark Recognition Challenge" (2018), which '
               'you accept on its page; images are web URLs whose licences vary. Google '
               'no longer distributes GLDv1.'),
        manual=('Sign in to Kaggle, accept the rules of the "Google Landmark Recognition '
                'Challenge" (2018) and download train.csv; fetch the images by URL with the '
                "challenge's script into a folder train/ (<id>.jpg); put train.csv and "
                'train/ in one folder and pass it as --from-dir (train/ is linked, not '
                'copied). Many URLs are dead: configs read it with skip_missing=True.'),
        default_root='data/gldv1noisy', configs='dtop'),
    DatasetInfo(
        name='ncclean', title='NC-clean (Landmarks-clean of Gordo et al.)',
        homepage='https://europe.naverlabs.com/research/computer-vision/'
                 'learning-visual-representations/deep-image-retrieval/',
        files=(RemoteFile('annotation_clean_train.txt', size=5_000_000, approx=True),
               RemoteFile('annotation_clean_val.txt', size=1_000_000, approx=True),
               RemoteFile('images', folder=True, size=0, unpacked=5 * GB, approx=True,
                          optional=True)),
        views=(CountView('train', dict(type='NCCleanDataset', split='train',
                                       skip_missing=True), 27_965, 581, exact=False), ),
        terms=('Lists by Gordo et al. (ECCV 2016) of images of the Neural Codes landmarks '
               'dataset (Babenko et al., ECCV 2014), web URLs whose licences vary; research '
               'use.'),
        manual=('Download the Landmarks-clean lists (annotation_clean_train.txt, '
                'annotation_clean_val.txt) from the deep-image-retrieval page of Naver Labs '
                'Europe, fetch the images by URL into a folder images/ (named by the last '
                'component of each URL), put the lists and images/ in one folder and pass it '
                'as --from-dir (images/ is linked, not copied). Many URLs are dead: configs '
                'read it with skip_missing=True.'),
        default_root='data/ncclean', configs='dtop'),
)}


def dataset_info(name: str) -> DatasetInfo:
    """The entry of ``name``; an unknown name is an error listing the known ones."""
    if name not in DATASETS:
        raise ValueError(f'unknown dataset {name!r}; expected one of {sorted(DATASETS)}')
    return DATASETS[name]
