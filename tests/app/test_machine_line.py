"""The run's machine line (issue 30, item 2): the machine, device and dtype, and for a live CPU run the torch
thread count and why; a trace's own strings are shown literally."""

from __future__ import annotations

from types import SimpleNamespace

from app.views.metrics import machine_line


def _trace(**meta):
    return SimpleNamespace(meta=meta, summary={"device": meta.get("device"), "dtype": "float32"})


def test_a_live_cpu_run_names_its_threads():
    line = machine_line(_trace(device="cpu", device_name="Intel Xeon (2 threads)"), "2 (CPU quota 2)")
    assert line == "Measured on `Intel Xeon (2 threads)` · `cpu float32` · torch threads: `2 (CPU quota 2)`"


def test_a_gpu_or_recorded_run_has_no_thread_note():
    assert "threads:" not in machine_line(_trace(device="cuda", device_name="NVIDIA H200"), "16 (CPU affinity)")
    assert machine_line(_trace(device="cpu", device_name="Xeon (4 threads)")).endswith("`cpu float32`")


def test_untrusted_names_stay_literal():
    line = machine_line(_trace(device="cpu", device_name="![x](http://evil) `tick`"))
    assert "`![x](http://evil) ʼtickʼ`" in line
