"""A local S3 server for tests: moto's, on 127.0.0.1 and a free port, with one bucket.

``start()`` gives the server and the query that every ``s3://`` URI of a test carries: the
endpoint, plain http and a region; ``uri`` adds moto's test credentials as the URI's user info
(pyarrow's form: ``s3://KEY:SECRET@bucket/...``), so that any process or Ray actor opening the
URI reaches the server with nothing in its environment."""
from __future__ import annotations

import logging

import pyarrow.fs as pafs

BUCKET = "weir-checkpoints"
#: The bucket's URI with moto's test credentials.
ROOT = f"s3://testing:testing@{BUCKET}"


def start(bucket: str = BUCKET):
    """(the running server, the URI query); raises ImportError without ``moto[server]``."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    query = f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
    filesystem, _ = pafs.FileSystem.from_uri(f"s3://testing:testing@{bucket}?{query}&allow_bucket_creation=true")
    filesystem.create_dir(bucket)
    return server, query


def uri(query: str, prefix: str) -> str:
    return f"{ROOT}/{prefix}?{query}"
