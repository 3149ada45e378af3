"""A real S3 server on the loopback address (moto's server mode) for the
store tests and benchmarks, with fsspec pointed at it while it runs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@contextmanager
def s3_server(bucket: str) -> Iterator[Any]:
    """An empty ``bucket`` on a moto S3 server started on 127.0.0.1 (a free
    port), fsspec's ``s3://`` (s3fs) set to it and test credentials in the
    environment, all undone on exit; yields the s3fs file system."""
    import fsspec.config
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line a request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    saved_env = {k: os.environ.get(k) for k in CREDENTIALS}
    saved_conf = fsspec.config.conf.get("s3")
    os.environ.update(CREDENTIALS)
    fsspec.config.conf["s3"] = {"endpoint_url": f"http://{host}:{port}"}
    try:
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.mkdir(bucket)
        yield fs
    finally:
        if saved_conf is None:
            fsspec.config.conf.pop("s3", None)
        else:
            fsspec.config.conf["s3"] = saved_conf
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()
