"""posembed's compiled kernels: the C++ extension ``_native`` (built from
``cpp/``), re-exported here so that every layer above imports one name,
``posembed._core``. Use the functions in the posembed package instead."""

from posembed._core._native import *  # noqa: F403
from posembed._core._native import _probes as _probes
