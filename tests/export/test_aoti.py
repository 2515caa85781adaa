"""AOTInductor takes kiln.export's program: compiled and packaged here, loaded in a fresh
process, equal to eager at another size in the dynamic range.  Slow (a C++ compile)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from torch.export import Dim

import kiln
from kiln.bench.export_programs import Mixer


@pytest.mark.slow
def test_aoti_package_loaded_in_a_fresh_process(tmp_path):
    torch.manual_seed(0)
    m = Mixer()
    ep = kiln.export(m, (torch.randn(3, 6, 8),),
                     dynamic_shapes={"x": {0: Dim("B", min=2, max=16), 1: Dim("T", min=5, max=32)}})
    package = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "mixer.pt2"))
    torch.save(m.state_dict(), tmp_path / "state.pt")
    check = textwrap.dedent(f"""
        import torch
        from kiln.bench.export_programs import Mixer
        m = Mixer()
        m.load_state_dict(torch.load({str(tmp_path / 'state.pt')!r}))
        run = torch._inductor.aoti_load_package({package!r})
        x = torch.randn(5, 9, 8)
        assert torch.allclose(run(x), m(x), atol=1e-5), "differs from eager"
        print("same")
    """)
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=600)
    assert done.stdout.strip().endswith("same"), done.stderr[-2000:]
