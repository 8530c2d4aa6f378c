"""W9's plain-client limit: boto3 reading W3's shards from the store through
the same proxy as ingest, with concurrent ranged GETs (--workers x 4 requests
of 4 MiB in flight), no parsing: the records are counted from the TFRecord
framing; the label sum is not computed (checksum null: compare.py checks the
count). INGEST_COMPARE_S3 is the line `ingest_compare_remote serve` printed."""

import json
import os
import struct
from concurrent.futures import ThreadPoolExecutor

import boto3
import botocore
from botocore.config import Config

import common

PART = 4 << 20


def main():
    args = common.parse_args(__doc__)
    if args.workload != "W9":
        common.cannot("the plain S3 client is W9's limit only")
    s3 = json.loads(os.environ["INGEST_COMPARE_S3"])
    in_flight = 4 * args.workers

    def epoch():
        client = boto3.client("s3", endpoint_url=s3["proxy"], aws_access_key_id=s3["key"],
                              aws_secret_access_key=s3["secret"], region_name="us-east-1",
                              config=Config(max_pool_connections=in_flight))
        objects = [o for o in client.list_objects_v2(Bucket=s3["bucket"])["Contents"]
                   if o["Key"].endswith("-of-00016")]
        parts = [(o["Key"], start, min(o["Size"], start + PART) - 1)
                 for o in objects for start in range(0, o["Size"], PART)]

        def get(part):
            key, first, last = part
            return key, first, client.get_object(Bucket=s3["bucket"], Key=key,
                                                 Range=f"bytes={first}-{last}")["Body"].read()

        with ThreadPoolExecutor(in_flight) as pool:
            pieces = sorted(pool.map(get, parts))
        count = 0
        for o in objects:
            data = b"".join(p[2] for p in pieces if p[0] == o["Key"])
            offset = 0
            while offset + 12 <= len(data):
                (length,) = struct.unpack_from("<Q", data, offset)
                offset += 12 + length + 4
                count += 1
        return count, None

    version = f"boto3 {boto3.__version__} (botocore {botocore.__version__})"
    common.timed_epochs("limit", version, args.epochs, epoch)


if __name__ == "__main__":
    main()
