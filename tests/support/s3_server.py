"""A local S3 server for tests: moto's, on 127.0.0.1 and a free port, with one bucket.

``start()`` gives the server and the query that every ``s3://`` URI of a test carries: the
endpoint, plain http, a region and moto's test credentials, so that any process or Ray actor
opening the URI reaches it with nothing in its environment."""
from __future__ import annotations

import logging

import pyarrow.fs as pafs

BUCKET = "weir-checkpoints"


def start(bucket: str = BUCKET):
    """(the running server, the URI query); raises ImportError without ``moto[server]``."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    query = (f"endpoint_override={host}:{port}&scheme=http&region=us-east-1"
             "&access_key=testing&secret_key=testing")
    filesystem, _ = pafs.FileSystem.from_uri(f"s3://{bucket}?{query}&allow_bucket_creation=true")
    filesystem.create_dir(bucket)
    return server, query


def uri(query: str, prefix: str, bucket: str = BUCKET) -> str:
    return f"s3://{bucket}/{prefix}?{query}"
