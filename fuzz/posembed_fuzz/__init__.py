"""posembed's fuzz harness, run by ``fuzz/fuzz_posembed.py`` (its docstring
has the command line). One module a mode or family of inputs:

* :mod:`.common`: the decoding of an input's bytes, a call's recipe, the
  known bugs, the statistics (every mode);
* ``--mode calls``: :mod:`.calls` (a call against its twin),
  :mod:`.calls_values` (value pools and argument recipes),
  :mod:`.calls_builders` (the array functions' arguments),
  :mod:`.calls_windows` (the window functions'), :mod:`.calls_compare`
  (results against the twins');
* ``--mode race``: :mod:`.races`;
* ``--mode files``: :mod:`.files` (which reader an input goes to),
  :mod:`.files_common`, :mod:`.files_headers` (safetensors, .npy, chunk
  outputs), :mod:`.files_parts`, :mod:`.files_models`, :mod:`.files_arrow`,
  :mod:`.files_store`;
* :mod:`.runner`: the run loop, the engines (plain and atheris) and the
  command line.

The package is imported as ``posembed_fuzz`` (not ``fuzz``, a name a package
installed from PyPI could hold), with ``fuzz/`` on ``sys.path``.
"""
