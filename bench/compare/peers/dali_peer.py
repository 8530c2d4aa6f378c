"""NVIDIA DALI's CPU pipelines (no GPU: device_id=None, cpu operators) on the
workloads, as DALI's documentation writes them: fn.readers.tfrecord over index
files made beforehand (compare.py's data step, untimed), fn.decoders.image or
fn.decoders.image_random_crop, fn.crop_mirror_normalize, num_threads = --workers
(cores by default; W9's is larger, see below).
The reader pads the last batch (pad_last_batch) and the padding is dropped here,
so that an epoch holds exactly the data set's records."""

import json
import math
import os

import nvidia.dali as dali
import nvidia.dali.fn as fn
import nvidia.dali.tfrecord as tfrec
import nvidia.dali.types as types
from nvidia.dali import pipeline_def

import common


def reader(files, index_files, features, shuffle):
    return fn.readers.tfrecord(path=files, index_path=index_files,
                               features=features, random_shuffle=shuffle,
                               initial_fill=10_000 if shuffle else 1024, seed=7,
                               pad_last_batch=True, name="Reader")


@pipeline_def
def w3(files, index_files):
    ex = reader(files, index_files, {"image": tfrec.FixedLenFeature((), tfrec.string, ""),
                        "label": tfrec.FixedLenFeature([1], tfrec.int64, -1)}, shuffle=True)
    pixels = fn.reshape(ex["image"], shape=[32, 32, 3])
    image = (fn.cast(pixels, dtype=types.FLOAT) - 127.5) / 127.5
    return image, ex["label"]


@pipeline_def
def w4(files, index_files, rrc):
    ex = reader(files, index_files, {"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                        "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)},
                shuffle=False)
    jpegs = ex["image/encoded"]
    norm = dict(dtype=types.FLOAT, output_layout="CHW", mean=list(common.MEAN * 255),
                std=list(common.STD * 255), mirror=fn.random.coin_flip(probability=0.5))
    if rrc:
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0],
                                               random_aspect_ratio=[3 / 4, 4 / 3],
                                               num_attempts=10)
        images = fn.resize(images, resize_x=common.CROP, resize_y=common.CROP,
                           interp_type=types.INTERP_LINEAR, antialias=True)
        images = fn.crop_mirror_normalize(images, **norm)
    else:
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.crop_mirror_normalize(images, crop=(common.CROP, common.CROP),
                                          crop_pos_x=fn.random.uniform(range=(0.0, 1.0)),
                                          crop_pos_y=fn.random.uniform(range=(0.0, 1.0)), **norm)
    return images, ex["image/class/label"]


def main():
    args = common.parse_args(__doc__)
    w = args.workload
    if w == "W3-GZIP":
        common.cannot("DALI's TFRecord reader has no GZIP input")
    if w not in ("W3", "W4", "W4-RRC", "W4L", "W4L-RRC", "W9"):
        common.cannot(f"no DALI version of {w}")
    files = common.shards(args.data, "W3" if w == "W9" else w)
    index_files = [f + ".idx" for f in files]
    if w == "W9":
        # DALI's readers take s3:// URLs (AWS SDK for C++): the same objects through the proxy.
        # On s3:// the TFRecord reader sends one ranged GET per record (read_ahead and
        # dont_use_mmap do not change that), run on the pipeline's threads: compare.py passes
        # --workers above the core count so that several are in flight.
        s3 = json.loads(os.environ["INGEST_COMPARE_S3"])
        os.environ.update(AWS_ENDPOINT_URL=s3["proxy"], AWS_ACCESS_KEY_ID=s3["key"],
                          AWS_SECRET_ACCESS_KEY=s3["secret"], AWS_REGION="us-east-1",
                          AWS_DEFAULT_REGION="us-east-1")
        files = [f"s3://{s3['bucket']}/{os.path.basename(f)}" for f in files]
    batch = common.W4_BATCH if w.startswith("W4") else common.W3_BATCH
    kw = dict(batch_size=batch, num_threads=args.workers, device_id=None, seed=7,
              prefetch_queue_depth=2)
    state = {}

    def epoch():
        # The pipeline is built in the first epoch's clock, as every system's is.
        if "pipe" not in state:
            pipe = (w4(files, index_files, w.endswith("RRC"), **kw) if w.startswith("W4")
                    else w3(files, index_files, **kw))
            pipe.build()
            state["pipe"] = pipe
        pipe = state["pipe"]
        n = pipe.epoch_size("Reader")
        count = total = 0
        for _ in range(math.ceil(n / batch)):
            _, labels = pipe.run()
            keep = min(batch, n - count)
            total += int(labels.as_array()[:keep].sum())
            count += keep
        return count, total

    common.timed_epochs("dali", dali.__version__, args.epochs, epoch)


if __name__ == "__main__":
    main()
