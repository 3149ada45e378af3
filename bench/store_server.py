"""A real S3 server on the loopback address (moto's server mode) for the
store tests and benchmarks, with fsspec pointed at it while it runs."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


class Server:
    """The running server: :meth:`stop` it as a failing store would go, and
    :meth:`start` it again on the same port (moto keeps its buckets in the
    process, so what was put there is there again)."""

    def __init__(self, port: int) -> None:
        from moto.server import ThreadedMotoServer

        self.port = port
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self._server.start()
        self.port = int(self._server.get_host_and_port()[1])

    def stop(self) -> None:
        self._server.stop()

    def start(self) -> None:
        self.__init__(self.port)  # type: ignore[misc]


@contextmanager
def s3_server(bucket: str, quick_failure: bool = False) -> Iterator[Any]:
    """An empty ``bucket`` on a moto S3 server started on 127.0.0.1 (a free
    port), fsspec's ``s3://`` (s3fs) set to it and test credentials in the
    environment, all undone on exit; yields the s3fs file system, its
    ``server`` attribute the :class:`Server`. ``quick_failure``: one attempt
    and a 1 s connect timeout a request (a stopped server fails at once)."""
    import fsspec.config

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line a request otherwise
    server = Server(0)
    saved_env = {k: os.environ.get(k) for k in CREDENTIALS}
    saved_conf = fsspec.config.conf.get("s3")
    os.environ.update(CREDENTIALS)
    conf: dict[str, Any] = {"endpoint_url": f"http://127.0.0.1:{server.port}"}
    if quick_failure:
        conf["config_kwargs"] = {"connect_timeout": 1, "retries": {"max_attempts": 1}}
    fsspec.config.conf["s3"] = conf
    try:
        fs = fsspec.filesystem("s3", skip_instance_cache=True)
        fs.mkdir(bucket)
        fs.server = server
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
