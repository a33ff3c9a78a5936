"""Images per second of ``extract_features`` against a bare loop doing the same work, each
contender in its own process.

  python tools/benchmarks/bench_extract.py [--images 500] [--batch-size 32] [--threads 2]
                                           [--repeats 3] [--min-seconds 5]

The bare loop: the same timm model created directly with timm, OpenCV decoding, the same
resize / crop / normalisation written by hand, the same batch size and threads, the CLS token
L2-normalised. ``extract_features`` runs the model built from the config (random weights)
through the config's test pipeline. Two settings: the quick-start model (4-block ViT-Tiny,
32 x 32) on the digits test images, and DeiT-S/224 (the IRT SOP config: resize 256, centre
crop 224) on generated 256 x 256 JPEGs. Each contender process embeds one batch untimed
(warm-up), then all the images, timed, again until --min-seconds have gone (median pass); the
contenders take turns for --repeats rounds (so that other load on the machine hits them
alike) and the median counts. Prints a markdown table
with time, images/s, peak resident memory and the ratio to the bare loop of the same setting,
and the load average before and after (other work on the machine shows there).
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

from irtbox.utils.memory import peak_rss_mb
SETTINGS = {
    'vit-tiny/32 digits': dict(
        config='configs/quickstart/irt-r_vit-tiny_1xb64-500_digits.py', resize=32, crop=None,
        timm=('vit_tiny_patch16_224', dict(img_size=32, patch_size=4, depth=4)),
        mean=(127.5,) * 3, std=(127.5,) * 3, rgb=False),
    'deit-s/224 jpeg': dict(
        config='configs/irt/irt-r_deit-s_1xb64-35k_sop.py', resize=256, crop=224,
        timm=('deit_small_patch16_224', {}),
        mean=(123.675, 116.28, 103.53), std=(58.395, 57.12, 57.375), rgb=True),
}


def make_images(setting, count, folder):
    """Digits PNGs for the small model, random-texture JPEGs for DeiT-S."""
    if setting.startswith('vit-tiny'):
        from irtbox.datasets.digits import prepare_digits
        prepare_digits(folder)
        from irtbox.apis import list_images
        return list_images(osp.join(folder, 'test'))[:count]
    import cv2
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        image = cv2.GaussianBlur(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8), (9, 9), 3)
        paths.append(osp.join(folder, f'{i:05d}.jpg'))
        cv2.imwrite(paths[-1], image, [cv2.IMWRITE_JPEG_QUALITY, 90])
    return paths


def timed(run, paths, batch_size, min_seconds):
    """Median seconds of ``run(paths)`` over passes repeated until ``min_seconds`` have gone
    (at least one), after ``run(paths[:batch_size])`` (warm-up); and its count of embeddings."""
    run(paths[:batch_size])
    seconds = []
    while not seconds or sum(seconds) < min_seconds:
        started = time.perf_counter()
        count = run(paths)
        seconds.append(time.perf_counter() - started)
    return float(np.median(seconds)), count


def bare_loop(setting, batch_size):
    """A function embedding a list of paths: timm, OpenCV and torch by hand."""
    import cv2
    import timm
    import torch
    import torch.nn.functional as F
    spec = SETTINGS[setting]
    name, kwargs = spec['timm']
    model = timm.create_model(name, pretrained=False, num_classes=0, **kwargs).eval()
    mean = torch.tensor(spec['mean']).view(1, 3, 1, 1)
    std = torch.tensor(spec['std']).view(1, 3, 1, 1)

    def load(path):
        image = cv2.imread(path, cv2.IMREAD_COLOR)
        image = cv2.resize(image, (spec['resize'], spec['resize']), interpolation=cv2.INTER_LINEAR)
        if spec['crop']:
            top = (spec['resize'] - spec['crop']) // 2
            image = image[top:top + spec['crop'], top:top + spec['crop']]
        if spec['rgb']:
            image = image[..., ::-1]
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1)))

    def run(paths):
        out = []
        with torch.inference_mode():
            for start in range(0, len(paths), batch_size):
                batch = torch.stack([load(p) for p in paths[start:start + batch_size]]).float()
                tokens = model.forward_features((batch - mean) / std)
                out.append(F.normalize(tokens[:, 0], dim=-1))
        return len(torch.cat(out))
    return run


def irtbox_loop(setting, batch_size, num_workers):
    """A function embedding a list of paths with ``extract_features``."""
    from irtbox.apis import extract_features, init_model
    model = init_model(osp.join(ROOT, SETTINGS[setting]['config']),
                       cfg_options={'model.backbone.pretrained': False})

    def run(paths):
        return len(extract_features(model, paths, batch_size=batch_size,
                                    num_workers=num_workers, progress=False).ids)
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--images', type=int, default=500)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--threads', type=int, default=2)
    parser.add_argument('--repeats', type=int, default=3, help='rounds; the median counts')
    parser.add_argument('--min-seconds', type=float, default=5.0,
                        help='a contender process repeats its pass (median) for this long')
    parser.add_argument('--settings', nargs='+', default=list(SETTINGS), choices=list(SETTINGS),
                        help='which settings to run (default: all)')
    parser.add_argument('--one', nargs=4, help=argparse.SUPPRESS)  # setting contender workers dir
    args = parser.parse_args()
    if args.one:
        import torch
        torch.set_num_threads(args.threads)
        setting, contender, workers, folder = args.one
        with open(osp.join(folder, 'paths.json')) as f:
            paths = json.load(f)
        run = (bare_loop(setting, args.batch_size) if contender == 'bare' else
               irtbox_loop(setting, args.batch_size, int(workers)))
        seconds, count = timed(run, paths, args.batch_size, args.min_seconds)
        print(json.dumps(dict(seconds=seconds, images=count, peak_mb=peak_rss_mb())))
        return
    load_before = os.getloadavg()
    contenders = (('bare', 0), ('irtbox', 0), ('irtbox', 2))
    rows = []
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    for setting in args.settings:
        with tempfile.TemporaryDirectory() as folder:
            with open(osp.join(folder, 'paths.json'), 'w') as f:
                json.dump(make_images(setting, args.images, folder), f)
            runs = {c: [] for c in contenders}
            for _ in range(args.repeats):
                for contender, workers in contenders:
                    out = subprocess.run(
                        [sys.executable, __file__, '--one', setting, contender, str(workers),
                         folder, '--batch-size', str(args.batch_size), '--threads',
                         str(args.threads), '--min-seconds', str(args.min_seconds)],
                        check=True, capture_output=True, text=True, env=env)
                    runs[contender, workers].append(json.loads(out.stdout.strip().splitlines()[-1]))
            for (contender, workers), done in runs.items():
                rows.append((setting, contender, workers, dict(
                    seconds=float(np.median([r['seconds'] for r in done])),
                    images=done[0]['images'], peak_mb=max(r['peak_mb'] for r in done))))
    print(f'{args.images} images per setting, batch {args.batch_size}, {args.threads} threads, '
          f'median of {args.repeats} rounds; {os.cpu_count()} cores, load average (1 min) '
          f'{load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after\n')
    print('| setting | contender | decode workers | time (s) | images/s | vs bare loop | '
          'peak RSS (MB) |')
    print('|---|---|---|---|---|---|---|')
    bare = {s: r['images'] / r['seconds'] for s, c, _, r in rows if c == 'bare'}
    for setting, contender, workers, r in rows:
        speed = r['images'] / r['seconds']
        name = 'bare timm + OpenCV loop' if contender == 'bare' else 'extract_features'
        print(f'| {setting} | {name} | {workers} | {r["seconds"]:.2f} | {speed:.0f} | '
              f'{speed / bare[setting]:.2f} | {r["peak_mb"]:.0f} |')


if __name__ == '__main__':
    main()
