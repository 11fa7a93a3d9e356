"""The shims' forced pre-include (cupy_rawcode/workaround.h) is handed to NVRTC by its path, as
the resolver finds it in the search list: a relative --pre-include is looked for in the working
directory first (NVRTC, as gcc), where a file of that name would be compiled and never keyed."""

import pytest

import cupy_rawcode
from cupy_rawcode.compiler.nvrtc import nvrtc_flags
from cupy_rawcode.key.request import WORKAROUND, context, make_request

KERNEL = '#ifndef CUPY_RAWCODE\n#error not the shims\' workaround\n#endif\nextern "C" __global__ void k() {}\n'

# name -> the text of a cupy_rawcode/workaround.h in the working directory
IN_THE_CWD = {
    "one that stops the compile": "#error the working directory's copy\n",
    "one that leaves the shims' macro out": "// an old copy\n",
}


@pytest.mark.parametrize("name", sorted(IN_THE_CWD))
def test_a_workaround_header_in_the_working_directory_is_never_read(tmp_path, monkeypatch, name):
    copy = tmp_path / "cwd" / "cupy_rawcode" / "workaround.h"
    copy.parent.mkdir(parents=True)
    copy.write_text(IN_THE_CWD[name])
    monkeypatch.chdir(tmp_path / "cwd")
    req = make_request(KERNEL, arch="sm_90")
    forced = [f for f in nvrtc_flags(req, context(req)) if f.startswith("--pre-include=")]
    shim = [d.path for d in context(req).dirs if d.tag == "shim"][0]
    assert forced == [f"--pre-include={shim}/{WORKAROUND}"]
    assert cupy_rawcode.compile(KERNEL, arch="sm_90").code  # NVRTC read the shims' own
