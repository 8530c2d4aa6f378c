"""Grain on the workloads, as its documentation recommends: a MapDataset over a
random-access source (the TFRecord shards through their index files), the
transforms as map / random_map, batch, then mp_prefetch with one worker
process per core. Grain's shuffle is a global permutation of the indexes (no
shuffle buffer); W4 reads in order. The images go through NumPy and Pillow
(transforms.py): Grain has no image ops."""

import importlib.metadata

import grain
import numpy as np

import common
import transforms


def w1_map(x):
    return 2 * x + 1


class W2Map:
    """W2's C++ function, loaded in each worker (a ctypes function does not pickle)."""

    def __call__(self, x):
        if not hasattr(self, "f"):
            self.f = common.w2_function()
        return self.f(int(x))

    def __getstate__(self):
        return {}


def w3_map(record):
    return common.w3_decode(record)


def w4_map(record, rng):
    jpeg, label = common.w4_parse(record)
    image = transforms.random_crop_flip(transforms.decode(jpeg), rng)
    return transforms.normalise_chw(image), label


def w4_rrc_map(record, rng):
    jpeg, label = common.w4_parse(record)
    return transforms.normalise_chw(transforms.random_resized_crop(jpeg, rng)), label


def main():
    args = common.parse_args(__doc__)
    w = args.workload
    if w == "W3-GZIP":
        common.cannot("Grain reads random-access sources; a GZIP stream has no record offsets")
    if w not in ("W1", "W2", "W3", "W4", "W4-RRC", "W4L", "W4L-RRC"):
        common.cannot(f"no Grain version of {w}")
    if w == "W1":
        ds = grain.MapDataset.range(common.element_count(args.data, w)).map(w1_map)
        ds = ds.batch(256, drop_remainder=True)
    elif w == "W2":
        ds = grain.MapDataset.range(common.element_count(args.data, w)).map(W2Map()).batch(256)
    elif w == "W3":
        ds = grain.MapDataset.source(common.TFRecordSource(common.shards(args.data, w)))
        ds = ds.shuffle(seed=7).map(w3_map).batch(common.W3_BATCH)
    else:
        ds = grain.MapDataset.source(common.TFRecordSource(common.shards(args.data, w)))
        ds = ds.random_map(w4_rrc_map if w.endswith("RRC") else w4_map, seed=7)
        ds = ds.batch(common.W4_BATCH)
    options = grain.MultiprocessingOptions(num_workers=args.workers)

    def epoch():
        count = total = 0
        for batch in ds.to_iter_dataset().mp_prefetch(options):
            labels = batch if w in ("W1", "W2") else batch[1]
            count += len(labels)
            total += int(np.sum(labels))
        return count, total

    common.timed_epochs("grain", importlib.metadata.version("grain"), args.epochs, epoch)


if __name__ == "__main__":
    main()
