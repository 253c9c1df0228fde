"""Torch threads sized from the container's CPU quota (issue 30, item 2), read from fake cgroup trees."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from engine import hardware
from engine.hardware import ThreadBudget, cpu_quota, thread_budget


def _tree(tmp_path: Path, files: dict[str, str], proc: str) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proc_file = tmp_path / "proc_self_cgroup"
    proc_file.write_text(proc)
    return root, proc_file


def test_cgroup_v2_cpu_max_in_a_container_namespace(tmp_path):
    root, proc = _tree(tmp_path, {"cpu.max": "200000 100000\n"}, "0::/\n")
    assert cpu_quota(root, proc) == 2.0


def test_cgroup_v2_no_limit(tmp_path):
    root, proc = _tree(tmp_path, {"cpu.max": "max 100000\n"}, "0::/\n")
    assert cpu_quota(root, proc) is None


def test_cgroup_v2_the_smallest_limit_on_the_path_wins(tmp_path):
    files = {"cpu.max": "max 100000", "kubepods/cpu.max": "800000 100000", "kubepods/pod1/cpu.max": "150000 100000"}
    root, proc = _tree(tmp_path, files, "0::/kubepods/pod1\n")
    assert cpu_quota(root, proc) == 1.5


def test_cgroup_v1_cfs_quota(tmp_path):
    files = {"cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "300000\n", "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n"}
    root, proc = _tree(tmp_path, files, "12:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n")
    assert cpu_quota(root, proc) == 3.0


def test_cgroup_v1_unlimited_quota_is_minus_one(tmp_path):
    files = {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}
    root, proc = _tree(tmp_path, files, "1:cpu:/\n")
    assert cpu_quota(root, proc) is None


def test_no_cgroup_files_at_all(tmp_path):
    assert cpu_quota(tmp_path / "none", tmp_path / "none_either") is None


def test_budget_from_the_quota_rounded_down_and_capped_by_affinity():
    assert thread_budget(env={}, quota=2.0, affinity=16) == ThreadBudget(2, "CPU quota 2")
    assert thread_budget(env={}, quota=1.5, affinity=16) == ThreadBudget(1, "CPU quota 1.5")
    assert thread_budget(env={}, quota=0.5, affinity=16).threads == 1  # at least one
    assert thread_budget(env={}, quota=8.0, affinity=4) == ThreadBudget(4, "CPU affinity")  # taskset/cpuset smaller
    assert thread_budget(env={}, quota=None, affinity=6) == ThreadBudget(6, "CPU affinity")


def test_speclab_threads_overrides_the_quota():
    assert thread_budget(env={"SPECLAB_THREADS": "3"}, quota=1.0, affinity=2) == ThreadBudget(3, "SPECLAB_THREADS")
    for bad in ("zero", "0", "-2"):
        with pytest.raises(ValueError, match="SPECLAB_THREADS"):
            thread_budget(env={"SPECLAB_THREADS": bad}, quota=None, affinity=2)


def test_configure_threads_sets_torch_from_a_fake_quota(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("SPECLAB_THREADS", raising=False)
    monkeypatch.setattr(hardware, "cpu_quota", lambda: 1.0)
    try:
        assert hardware.configure_threads() == ThreadBudget(1, "CPU quota 1")
        assert torch.get_num_threads() == 1
        assert hardware.thread_line() == "1 (CPU quota 1)"
        monkeypatch.setenv("SPECLAB_THREADS", "2")
        assert hardware.configure_threads().threads == 2 and torch.get_num_threads() == 2
        assert hardware.thread_line() == "2 (SPECLAB_THREADS)"
    finally:
        torch.set_num_threads(before)


def test_this_machine_gets_a_sane_budget():
    budget = thread_budget(env={})
    assert 1 <= budget.threads <= hardware.cpu_affinity()


def test_a_run_leaves_the_cpus_other_work_keeps_busy(tmp_path):
    """/proc/loadavg's runnable count less this reader, the smallest of a few reads; the run's threads the budget less
    those, at least 1."""
    from engine.loadmeter import others_running, run_threads

    f = tmp_path / "loadavg"
    f.write_text("1.50 1.20 0.90 3/412 12345\n")
    assert others_running(samples=2, gap_s=0, loadavg=f) == 2
    f.write_text("0.10 0.20 0.30 1/400 12345\n")
    assert others_running(samples=2, gap_s=0, loadavg=f) == 0
    assert others_running(loadavg=tmp_path / "absent") == 0  # the OS cannot say: nothing subtracted
    f.write_text("garbled\n")
    assert others_running(loadavg=f) == 0
    assert 1 <= run_threads(2) <= 2 and run_threads(1) == 1


def test_a_trace_records_the_threads_its_run_used(tiny):
    import torch

    from engine import DecodeConfig, generate

    before = torch.get_num_threads()
    trace = generate(tiny, ["Say hello."], DecodeConfig(mode="autoregressive", max_new_tokens=4))
    assert 1 <= trace.summary["threads"] <= before and torch.get_num_threads() == before  # restored after the run
