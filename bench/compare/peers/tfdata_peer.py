"""tf.data (tensorflow-cpu) on the workloads, written as its performance guide
recommends: tf.io / tf.image ops, AUTOTUNE for every parallelism and buffer."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import common  # noqa: E402

AUTOTUNE = tf.data.AUTOTUNE
MEAN = tf.constant(common.MEAN * 255)
STD = tf.constant(common.STD * 255)


def w1(n):
    # tf.data's performance guide vectorises a cheap map: batch first, then
    # one map call per batch (element by element it runs at ~48k elements/s).
    return (tf.data.Dataset.range(n)
            .batch(256, drop_remainder=True)
            .map(lambda x: 2 * x + 1, num_parallel_calls=AUTOTUNE)
            .prefetch(AUTOTUNE))


def w3(files, gzip):
    spec = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}

    def decode(record):
        ex = tf.io.parse_single_example(record, spec)
        pixels = tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), [32, 32, 3])
        return (tf.cast(pixels, tf.float32) - 127.5) / 127.5, ex["label"]

    compression = "GZIP" if gzip else None
    return (tf.data.Dataset.from_tensor_slices(files)
            .interleave(lambda f: tf.data.TFRecordDataset(f, compression_type=compression),
                        cycle_length=4, num_parallel_calls=AUTOTUNE, deterministic=False)
            .map(decode, num_parallel_calls=AUTOTUNE, deterministic=False)
            .shuffle(10_000, seed=7)
            .batch(common.W3_BATCH)
            .prefetch(AUTOTUNE))


def w4(files, rrc, cache=False):
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}

    def parse_decode(record):
        ex = tf.io.parse_single_example(record, spec)
        return tf.io.decode_jpeg(ex["image/encoded"], channels=3), ex["image/class/label"]

    def augment(image, label):
        image = tf.image.random_crop(image, [common.CROP, common.CROP, 3])
        image = tf.image.random_flip_left_right(image)
        image = (tf.cast(image, tf.float32) - MEAN) / STD
        return tf.transpose(image, [2, 0, 1]), label

    def transform(record):
        ex = tf.io.parse_single_example(record, spec)
        jpeg = ex["image/encoded"]
        if rrc:
            # The ROI decode of TensorFlow's ResNet preprocessing: sample the
            # window from the header's shape, decode only it, resize to 224.
            begin, size, _ = tf.image.sample_distorted_bounding_box(
                tf.image.extract_jpeg_shape(jpeg), tf.zeros([0, 0, 4]),
                min_object_covered=0.0, aspect_ratio_range=(3 / 4, 4 / 3),
                area_range=(0.08, 1.0), max_attempts=10, use_image_if_no_bounding_boxes=True)
            window = tf.stack([begin[0], begin[1], size[0], size[1]])
            image = tf.io.decode_and_crop_jpeg(jpeg, window, channels=3)
            image = tf.image.resize(image, [common.CROP, common.CROP], antialias=True)
        else:
            image = tf.io.decode_jpeg(jpeg, channels=3)
            image = tf.image.random_crop(image, [common.CROP, common.CROP, 3])
        image = tf.image.random_flip_left_right(image)
        image = (tf.cast(image, tf.float32) - MEAN) / STD
        return tf.transpose(image, [2, 0, 1]), ex["image/class/label"]

    records = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=AUTOTUNE, deterministic=False)
    if cache:  # W5: the decoded images cached in memory, the transform after the cache
        return (records.map(parse_decode, num_parallel_calls=AUTOTUNE, deterministic=False)
                .cache()
                .map(augment, num_parallel_calls=AUTOTUNE, deterministic=False)
                .batch(common.W4_BATCH)
                .prefetch(AUTOTUNE))
    return (records
            .map(transform, num_parallel_calls=AUTOTUNE, deterministic=False)
            .batch(common.W4_BATCH)
            .prefetch(AUTOTUNE))


def main():
    args = common.parse_args(__doc__)
    w = args.workload
    if w == "W1":
        n = common.element_count(args.data, w)

        def epoch():
            total = count = 0
            for b in w1(n):
                total += int(tf.reduce_sum(b))
                count += int(b.shape[0])
            return count, total
    elif w == "W2":
        n = common.element_count(args.data, w)
        f = common.w2_function()

        def call(x):
            return np.int64(f(int(x)))

        def epoch():
            ds = (tf.data.Dataset.range(n)
                  .map(lambda x: tf.numpy_function(call, [x], tf.int64, stateful=False),
                       num_parallel_calls=AUTOTUNE)
                  .batch(256)
                  .prefetch(AUTOTUNE))
            total = count = 0
            for b in ds:
                total += int(tf.reduce_sum(b))
                count += int(b.shape[0])
            return count, total
    elif w in ("W3", "W3-GZIP", "W4", "W4-RRC", "W4L", "W4L-RRC", "W5"):
        files = common.shards(args.data, "W4" if w == "W5" else w)
        cached = w4(files, False, cache=True) if w == "W5" else None

        def epoch():
            if cached is not None:
                ds = cached  # one dataset for every epoch: its cache outlives an iteration
            elif w.startswith("W3"):
                ds = w3(files, w == "W3-GZIP")
            else:
                ds = w4(files, w.endswith("RRC"))
            count = total = 0
            for _, labels in ds:
                count += int(labels.shape[0])
                total += int(tf.reduce_sum(labels))
            return count, total
    else:
        common.cannot(f"no tf.data version of {w}")
    common.timed_epochs("tfdata", tf.__version__, args.epochs, epoch)


if __name__ == "__main__":
    main()
