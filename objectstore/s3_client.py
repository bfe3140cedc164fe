"""The S3 clients of a process: botocore's, all from one session that loads only what S3 needs.

A client built the usual way (``boto3.session.Session().client("s3")``, a session each) adds
about 21 MiB to a worker process, and a second client almost as much again; built here, the
first adds about 12 MiB, mostly botocore's own modules (objectstore.botocore_data says what
is left out of its data). Every client shares one session and its loader, and boto3 is not
imported: the store uses none of what it adds (resources, the transfer manager).
"""

from __future__ import annotations

import os
import threading

from botocore.config import Config
from botocore.loaders import Loader
from botocore.session import Session

from objectstore.botocore_data import SlimJSONFileLoader

_lock = threading.Lock()
_session: Session | None = None


def _shared_session() -> Session:
    global _session
    if _session is None:
        session = Session()
        # AWS_DATA_PATH (botocore's data_path) still comes first, as in botocore's own loader.
        extra = session.get_config_variable("data_path")
        paths = [os.path.expanduser(os.path.expandvars(p)) for p in extra.split(os.pathsep)] if extra else None
        session.register_component("data_loader", Loader(extra_search_paths=paths, file_loader=SlimJSONFileLoader()))
        _session = session
    return _session


def s3_client(endpoint_url: str | None, region: str):
    """An S3 client of the process's session (botocore's sessions are not thread-safe, hence
    the lock; its clients are)."""
    config = Config(
        # Path-style so endpoints like http://127.0.0.1:9000 work; AWS itself gets its default.
        s3={"addressing_style": "path" if endpoint_url else "auto"},
        signature_version="s3v4",
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=5,
        read_timeout=30,
    )
    with _lock:
        return _shared_session().create_client("s3", endpoint_url=endpoint_url, region_name=region, config=config)
