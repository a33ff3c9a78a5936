"""Search your own images with a trained retrieval model: build an index of a folder, query it,
serve it as a web page.

  build  CONFIG CKPT IMAGE_DIR INDEX_DIR   embed every image under IMAGE_DIR (a progress bar;
                                           unreadable files skipped and listed) and save a
                                           faiss index; --resume continues an interrupted build
  build --from-features FEATURES INDEX_DIR
                                           index what tools/extract.py (or dist_extract.sh /
                                           slurm_extract.sh) wrote: OUT/features.npz, or OUT
                                           itself once its shards are written (before the
                                           merge); no image is decoded. --max-index-memory 4G
                                           (and --max-build-memory) chooses the index that fits
  query  INDEX_DIR IMAGE [IMAGE ...]       the top --k of each image, printed, and written to
                                           --out results.json (a script's) or results.html
  serve  INDEX_DIR                         a web page and a JSON API on --host:--port

Examples (after the quick start):
  python tools/search.py build configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py \\
      work_dirs/quickstart/irt_r/iter_500.pth data/digits/test work_dirs/digits_index
  python tools/search.py query work_dirs/digits_index data/digits/test/7/0007.png --k 5
  python tools/search.py serve work_dirs/digits_index          # http://127.0.0.1:8000
  python tools/search.py build CONFIG CKPT photos/ photos_index --factory IVF1024,Flat
  python tools/search.py build --from-features work_dirs/extract/features.npz big_index \
      --max-index-memory 4G

CKPT may be "none": the config's own weights (e.g. timm's pretrained ones for IRT_O).
--factory takes a faiss factory string: Flat (exact, the default), IVF<n>,Flat, IVF<n>,PQ<m>,
HNSW32; for an approximate index the recall@10 against exact search is printed at build time.
--max-index-memory (from features only) picks Flat when it fits, else IVF over 8-bit scalar
codes, else IVF-PQ with the largest code that fits (docs/search_and_export.md); an approximate
index re-ranks --k-factor x k candidates (default 4) exactly against the embeddings its folder
keeps, read from disk at query time (1: no re-ranking); a build from features then
prints and records in the index's manifest the recall@10 against exact search on 1000 of the
embeddings and the single-query latency; a budget too small for any index is refused, naming
the smallest that fits. --factory overrides the choice.
With --device cuda and faiss-gpu the index is searched on the current GPU (an index type
faiss has no GPU version of, such as HNSW32, stays on the CPU with a warning); there
query --k is at most 2048, faiss-gpu's limit (--device cpu for more).
The index folder holds the faiss index, the embeddings with the image list and the model's
identity (one embeddings file, irtbox.structures.embeddings_file) and the config as JSON data
(loading runs no code from the folder; an older index keeps a Python config, used only when
--config names it): querying it with another model is refused.
"""
import argparse
import json
import os
import os.path as osp
import sys

from irtbox.cli import add_cfg_options, checkpoint_argument, command_parser, worded
from irtbox.utils.checks import int_argument

# irtbox.evaluation.functional.RERANKERS' names, spelled here so that --help imports no torch.
RERANK_METHODS = ('diffusion', 'kreciprocal', 'superglobal')

__all__ = ['parse_args', 'main', 'build', 'query', 'serve', 'load_searcher']


def parse_args(argv=None):
    """The command line of ``tools/search.py`` (``argv``: default ``sys.argv[1:]``)."""
    parser = command_parser('Search your own images with an irtbox model.', __doc__)
    commands = parser.add_subparsers(dest='command', required=True)
    build = commands.add_parser('build', help='embed a folder of images and save an index')
    build.add_argument('paths', nargs='+', metavar='CONFIG CKPT IMAGE_DIR INDEX_DIR',
                       help='the model\'s config file, its checkpoint file or URL (or "none"), '
                       'the folder of images (searched recursively) and the folder to write '
                       'the index to (created); with --from-features only INDEX_DIR')
    build.add_argument('--from-features', metavar='FEATURES',
                       help='index an extraction\'s embeddings (OUT/features.npz or OUT, its '
                       'shards) instead of embedding images')
    build.add_argument('--max-index-memory', type=_size_argument, metavar='SIZE',
                       help='with --from-features: the memory the index may take (e.g. 4G); '
                       'the index type is chosen to fit')
    build.add_argument('--max-build-memory', type=_size_argument, metavar='SIZE',
                       help='with --from-features: the memory the build may take at its peak '
                       '(besides the ids)')
    build.add_argument('--k-factor', type=int_argument(1), default=None, metavar='N',
                       help='an approximate index\'s N x k candidates '
                       'are scored again exactly against the stored embeddings, the best k '
                       'kept (default 4; 1: the index\'s own order)')
    build.add_argument('--config', dest='model_config', metavar='CONFIG',
                       help='with --from-features: the model\'s config, if it moved since the '
                       'extraction')
    build.add_argument('--factory', default=None,
                       help='faiss factory string: Flat (exact, the default), IVF1024,Flat, ...')
    build.add_argument('--batch-size', type=int, default=32, help='images per forward pass')
    build.add_argument('--num-workers', type=int, default=2, help='image decoding processes')
    build.add_argument('--shard-size', type=int, default=4096,
                       help='images embedded between two saves of progress (for --resume)')
    build.add_argument('--resume', action='store_true',
                       help='continue an interrupted build from the images already embedded')
    build.add_argument('--device', default=None, help='cpu or cuda (default: cuda if available)')
    add_cfg_options(build)

    query = commands.add_parser('query', help='search an index with query images')
    query.add_argument('index_dir', metavar='INDEX_DIR', help='a folder written by build')
    query.add_argument('images', nargs='+', metavar='IMAGE', help='query image files')
    query.add_argument('--k', type=int_argument(1), default=10,
                       help='results per query (default 10; at most 2048 on a GPU)')
    query.add_argument('--out', help='results.json or results.html')
    query.add_argument('--rerank', choices=RERANK_METHODS, default=None,
                       help='re-rank each query\'s shortlist with its paper\'s defaults '
                            '(docs/methods/reranking.md)')
    query.add_argument('--rerank-graph', choices=('exact', 'ivf'), default='exact',
                       help='the database graph of kreciprocal and diffusion: exact (time N²D) '
                            'or ivf (approximate, for large indexes); computed on first use '
                            'and kept in the index folder')

    serve = commands.add_parser('serve', help='serve a search page and a JSON API')
    serve.add_argument('index_dir', metavar='INDEX_DIR', help='a folder written by build')
    serve.add_argument('--host', default='127.0.0.1',
                       help='address to bind (default 127.0.0.1: this machine only)')
    serve.add_argument('--port', type=int, default=8000, help='default 8000')
    serve.add_argument('--max-upload-mb', type=float, default=10.0,
                       help='larger uploads get a 413 (default 10)')
    serve.add_argument('--max-megapixels', type=float, default=40.0,
                       help='larger images are refused before decoding (default 40)')
    serve.add_argument('--max-k', type=int, default=100,
                       help='the most results a request may ask for (default 100)')
    for command in (query, serve):
        command.add_argument('--checkpoint', help='where the build checkpoint is now, if it moved')
        command.add_argument('--config', help='the model\'s config to build it from instead of '
                             'the one the index keeps (needed for an older index, whose config '
                             'is Python: loading runs only a config you name)')
        command.add_argument('--device', help='cpu or cuda (default: cuda if available)')
    args = parser.parse_args(argv)
    if args.command == 'build':
        _build_paths(parser, args)
    if getattr(args, 'out', None) and not args.out.endswith(('.json', '.html')):
        parser.error(f'--out must name a .json or .html file, got {args.out}')
    return args


def _size_argument(text):
    from irtbox.search.budget import parse_size
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _build_paths(parser, args):
    """``build``'s positional paths: CONFIG CKPT IMAGE_DIR INDEX_DIR, or INDEX_DIR alone with
    --from-features."""
    if args.from_features:
        if len(args.paths) != 1:
            parser.error(f'build --from-features takes one path, INDEX_DIR, got {args.paths}')
        args.index_dir = args.paths[0]
        return
    if len(args.paths) != 4:
        parser.error('build takes CONFIG CKPT IMAGE_DIR INDEX_DIR (or --from-features FEATURES '
                     f'INDEX_DIR), got {len(args.paths)} path(s): {args.paths}')
    for option in ('max_index_memory', 'max_build_memory', 'model_config'):
        if getattr(args, option) is not None:
            parser.error(f'--{option.replace("_", "-").replace("model-", "")} goes with '
                         '--from-features; for a folder of images give --factory')
    args.config, args.checkpoint, args.image_dir, args.index_dir = args.paths
    args.checkpoint = checkpoint_argument(args.checkpoint)
    args.factory = args.factory or 'Flat'


def build(args):
    """``build``: :func:`irtbox.search.build.build_index`; the searcher."""
    from irtbox.cli.prechecks import check_inputs
    if args.from_features:
        return _build_from_features(args)
    check_inputs(args.config, args.cfg_options, checkpoint=args.checkpoint,
                 folders=dict(IMAGE_DIR=args.image_dir))
    from irtbox.search.build import FAILED_FILE, build_index  # torch: after the checks
    done = build_index(args.config, args.checkpoint, args.image_dir, args.index_dir,
                       factory=args.factory, batch_size=args.batch_size,
                       **({} if args.k_factor is None else dict(k_factor=args.k_factor)),
                       num_workers=args.num_workers, shard_size=args.shard_size,
                       resume=args.resume, device=args.device, cfg_options=args.cfg_options)
    searcher = done.searcher
    if done.recall_at_10 is not None:
        print(f'{args.factory}: recall@10 of the approximate index vs exact search = '
              f'{done.recall_at_10:.3f} (up to 1000 indexed images as queries)')
    print(f'indexed {len(searcher)} images of {args.image_dir} into {args.index_dir} '
          f'({searcher.dim}-d, {args.factory}) in {done.seconds:.1f} s; {len(done.failed)} '
          f'unreadable (listed in {osp.join(args.index_dir, FAILED_FILE)})')
    return searcher


def _build_from_features(args):
    from irtbox.search.build import build_index_from_features
    from irtbox.utils.memory import map_large_blocks
    map_large_blocks()  # this process's job is the build: its lists' freed buffers go back
    done = build_index_from_features(args.from_features, args.index_dir, factory=args.factory,
                                     max_index_memory=args.max_index_memory,
                                     max_build_memory=args.max_build_memory,
                                     config=args.model_config,
                                     **({} if args.k_factor is None else
                                        dict(k_factor=args.k_factor)))
    r = done.report
    print(f'{r["factory"]}' + (f' (nprobe {r["nprobe"]})' if r['nprobe'] else '') +
          (f', re-ranking {r["k_factor"]} x k exactly' if r['k_factor'] > 1 else '') +
          f': recall@10 vs exact search = {r["recall_at_10"]:.3f} ({r["recall_queries"]} of '
          f'the embeddings as queries, each without itself); one query on one thread: p50 '
          f'{r["query_p50_ms"]:.2f} ms, p99 {r["query_p99_ms"]:.2f} ms')
    print(f'indexed {len(done.searcher)} embeddings of {args.from_features} into '
          f'{args.index_dir} in {done.seconds:.1f} s (recorded in its manifest.json, "build")')
    return done.searcher


def load_searcher(args, images=()):
    """The index of ``args.index_dir`` with the model that built it; first (without torch)
    the paths given, and the query ``images``, are checked."""
    from irtbox.cli.prechecks import check_inputs
    check_inputs(args.config, checkpoint=args.checkpoint, checkpoint_argument='--checkpoint',
                 folders=dict(INDEX_DIR=args.index_dir), files=[('IMAGE', p) for p in images])
    from irtbox.search import ImageSearcher, load_index_model
    from irtbox.utils.dist import resolve_device
    device = resolve_device(args.device)
    model = load_index_model(args.index_dir, args.checkpoint, device, config=args.config)
    return ImageSearcher.load(args.index_dir, model=model, device=device)


def shown_path(path: str) -> str:
    """``path`` as a user can open it from here: relative to the working directory when it is
    under it, else absolute (a hit's id is relative to the build's folder, not to here)."""
    relative = osp.relpath(path)
    return osp.abspath(path) if relative.startswith(os.pardir) else relative


def query(args):
    """``query``: the hits of each image, printed and written to ``--out``."""
    searcher = load_searcher(args, args.images)
    from irtbox.search.results import write_results_html
    from irtbox.utils.fileio import atomic_write_text
    # Each hit's file, wherever the command runs: ids relative to the build's folder joined.
    results = [dict(query=path, hits=[dict(h.to_dict(), path=searcher.path_of(h.id))
                                      for h in hits])
               for path, hits in zip(args.images, searcher.search(
                   args.images, k=args.k,
                   rerank=_rerank_cfg(args)))]
    for result in results:
        print(result['query'])
        for hit in result['hits']:
            print(f'  {hit["rank"]:3d}  {hit["score"]:.4f}  {shown_path(hit["path"])}')
    gone = sorted({h['path'] for r in results for h in r['hits'] if not osp.isfile(h['path'])})
    if gone:
        print(f'warning: {len(gone)} of the hits\' files are not where the index recorded them '
              f'(moved or deleted since the build), e.g. {gone[0]}; rebuild the index to '
              'drop them')
    if args.out:
        if args.out.endswith('.json'):
            atomic_write_text(args.out, json.dumps(results, indent=1))
        else:
            write_results_html(args.out, results)
        print(f'results written to {args.out}')
    return results


def _rerank_cfg(args):
    if args.rerank is None or args.rerank == 'superglobal' or args.rerank_graph == 'exact':
        return None if args.rerank is None else dict(type=args.rerank)
    return dict(type=args.rerank, graph=dict(method=args.rerank_graph))


def serve(args):
    """``serve``: the web page and JSON API until interrupted."""
    from irtbox.utils.extras import require_extra
    # Before the model and the index are loaded.
    require_extra(('fastapi', 'uvicorn', 'multipart'), 'serve', 'tools/search.py serve')
    searcher = load_searcher(args)
    from irtbox.search.server import serve as run_server
    print(f'serving {args.index_dir} ({len(searcher)} images) on http://{args.host}:{args.port}')
    run_server(searcher, host=args.host, port=args.port,
               max_upload_bytes=int(args.max_upload_mb * 2**20),
               max_pixels=int(args.max_megapixels * 10**6), max_k=args.max_k)


def main(argv=None):
    """Run the command; what it returns (build: the searcher; query: the results)."""
    from irtbox.utils.extras import MissingExtraError
    args = parse_args(argv)
    try:
        return dict(build=build, query=query, serve=serve)[args.command](args)
    except (OSError, ValueError, MissingExtraError) as err:  # a full disk: the path is named
        raise SystemExit(f'search {args.command}: {_worded_for_flags(err)}')


def _worded_for_flags(err: Exception) -> str:
    """The library's error ``err`` with its remedy in this command's flags."""
    if 'irtbox.search' not in sys.modules:  # a refusal before any search: spare torch
        return worded(err)
    from irtbox.evaluation.neighbours.faiss_index import GpuTopKError
    from irtbox.search import CheckpointMovedError, IndexIntegrityError
    from irtbox.search.build import ShardsKeptError
    if isinstance(err, GpuTopKError):
        return (f'faiss on the GPU returns at most {err.limit} hits per query, got --k {err.k}; '
                'ask for fewer or search on the CPU (--device cpu)')
    if isinstance(err, CheckpointMovedError):
        return f'{err}; pass --checkpoint with its new location'
    if isinstance(err, IndexIntegrityError):
        return f'{err} with tools/search.py build'
    if isinstance(err, ShardsKeptError):
        return (f'{err.reason}. The embedded images are kept in {err.work}: make room and run '
                'the same command with --resume')
    return worded(err)
