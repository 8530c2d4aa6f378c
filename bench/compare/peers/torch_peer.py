"""PyTorch's DataLoader (Debian's python3-torch and python3-torchvision) on the
workloads: a map-style Dataset over the TFRecord shards' index files,
torchvision transforms on Pillow images (Pillow decodes), the default collate,
shuffle=True for W3 (a global permutation: DataLoader has no shuffle buffer),
num_workers 0 (--workers 0) or one per core; workers start inside the timed
epoch (persistent_workers is off, DataLoader's default)."""

import io

import torch
import torchvision
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms as T

import common

NORMALISE = T.Normalize(list(common.MEAN), list(common.STD))


class W1Range(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return 2 * i + 1


class W2Range(Dataset):
    """W2's C++ function over range(n), loaded in each worker (ctypes functions do not pickle)."""

    def __init__(self, n):
        self.n = n
        self.f = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:
            self.f = common.w2_function()
        return self.f(i)

    def __getstate__(self):
        return {"n": self.n, "f": None}


class W3Records(Dataset):
    def __init__(self, source):
        self.source = source

    def __len__(self):
        return len(self.source)

    def __getitem__(self, i):
        image, label = common.w3_decode(self.source[i])
        return torch.from_numpy(image), label


class W4Images(Dataset):
    def __init__(self, source, rrc):
        self.source = source
        crop = T.RandomResizedCrop(common.CROP, antialias=True) if rrc else T.RandomCrop(common.CROP)
        self.transform = T.Compose([crop, T.RandomHorizontalFlip(), T.ToTensor(), NORMALISE])

    def __len__(self):
        return len(self.source)

    def __getitem__(self, i):
        jpeg, label = common.w4_parse(self.source[i])
        return self.transform(Image.open(io.BytesIO(jpeg)).convert("RGB")), label


def main():
    args = common.parse_args(__doc__)
    w = args.workload
    if w == "W3-GZIP":
        common.cannot("a map-style Dataset needs record offsets; a GZIP stream has none")
    if w not in ("W1", "W2", "W3", "W4", "W4-RRC", "W4L", "W4L-RRC"):
        common.cannot(f"no DataLoader version of {w}")
    torch.manual_seed(7)
    if w == "W1":
        data, batch, shuffle = W1Range(common.element_count(args.data, w)), 256, False
    elif w == "W2":
        data, batch, shuffle = W2Range(common.element_count(args.data, w)), 256, False
    elif w == "W3":
        source = common.TFRecordSource(common.shards(args.data, w))
        data, batch, shuffle = W3Records(source), common.W3_BATCH, True
    else:
        source = common.TFRecordSource(common.shards(args.data, w))
        data, batch, shuffle = W4Images(source, w.endswith("RRC")), common.W4_BATCH, False
    loader = DataLoader(data, batch_size=batch, shuffle=shuffle, num_workers=args.workers,
                        drop_last=w == "W1")

    def epoch():
        count = total = 0
        for b in loader:
            labels = b if w in ("W1", "W2") else b[1]
            count += len(labels)
            total += int(labels.sum())
        return count, total

    version = f"{torch.__version__} (torchvision {torchvision.__version__})"
    system = f"torch-{args.workers}"
    common.timed_epochs(system, version, args.epochs, epoch)


if __name__ == "__main__":
    main()
