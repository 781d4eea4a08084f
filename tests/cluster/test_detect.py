"""Machine detection and its split between worker processes (taskcell.cluster.detect)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

from taskcell.cluster import detect
from taskcell.cluster.detect import (
    GpuInfo,
    MachineFacts,
    MigSlice,
    WorkerShare,
    advertised_resources,
    canonical_gpu_name,
    detect_gpus,
    detect_machine,
    parse_list_gpus,
    parse_query_gpu,
)

RECORDED = Path(__file__).parent / "recorded"
SHAPES = ("t4", "h100x8", "a100-mig")
GiB = 1 << 30
MiB = 1 << 20


def recorded(shape: str, name: str) -> str:
    return (RECORDED / shape / name).read_text()


def recorded_gpus(shape: str) -> tuple[GpuInfo, ...]:
    """The GPUs of a shape, merged from its two recorded outputs as detect_gpus() does."""
    slices = parse_list_gpus(recorded(shape, "list-gpus.txt"))
    return tuple(
        GpuInfo(
            index=gpu.index,
            name=gpu.name,
            product=gpu.product,
            uuid=gpu.uuid,
            memory_bytes=gpu.memory_bytes,
            mig=slices[gpu.index],
            mig_enabled=gpu.mig_enabled or bool(slices[gpu.index]),
        )
        for gpu in parse_query_gpu(recorded(shape, "query-gpu.csv"))
    )


def use_fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    """Put the recorded-output nvidia-smi for ``shape`` first on PATH, and hide pynvml."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    shutil.copy(RECORDED / "nvidia-smi", fake)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NVIDIA_SMI_DIR", str(RECORDED / shape))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError


# --- product names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("product", "name"),
    [
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40s"),
        ("NVIDIA A10G", "A10G"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("Tesla V100-PCIE-32GB", "V100"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA A100-PCIE-40GB", "A100"),
        ("NVIDIA A100-SXM4-80GB", "A100 80G"),
        ("NVIDIA A100 80GB PCIe", "A100 80G"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA H200", "H200"),
        # near misses keep their own (cleaned) names
        ("NVIDIA L40", "L40"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA GH200 480GB", "GH200 480GB"),
        ("Tesla V100S-PCIE-32GB", "V100S-PCIE-32GB"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("Quadro RTX 6000", "Quadro RTX 6000"),
    ],
    ids=lambda value: value.replace(" ", "_"),
)
def test_canonical_gpu_name(product, name):
    assert canonical_gpu_name(product) == name


def test_canonical_names_are_the_ones_requests_use():
    from taskcell.spec import KNOWN_GPUS

    products = ["Tesla T4", "NVIDIA L4", "NVIDIA L40S", "NVIDIA A10G", "Tesla V100-SXM2-16GB"]
    products += ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe"]
    products += ["NVIDIA H200", "NVIDIA B200", "NVIDIA A10", "NVIDIA A2", "NVIDIA GB10"]
    assert {canonical_gpu_name(product) for product in products} <= set(KNOWN_GPUS)


# --- parsing recorded nvidia-smi output ---------------------------------------------------------


def test_parse_query_gpu_t4():
    assert parse_query_gpu(recorded("t4", "query-gpu.csv")) == [
        GpuInfo(
            index=0,
            name="T4",
            product="Tesla T4",
            uuid="GPU-6513270e-269e-4d37-b2a7-4de452e6b438",
            memory_bytes=15360 * MiB,
            mig=(),
            mig_enabled=False,
        )
    ]


def test_parse_query_gpu_h100x8():
    gpus = parse_query_gpu(recorded("h100x8", "query-gpu.csv"))
    assert [gpu.index for gpu in gpus] == list(range(8))
    assert {(gpu.name, gpu.product, gpu.memory_bytes, gpu.mig_enabled) for gpu in gpus} == {
        ("H100", "NVIDIA H100 80GB HBM3", 81559 * MiB, False)
    }
    assert len({gpu.uuid for gpu in gpus}) == 8


def test_parse_query_gpu_reads_mig_mode_and_tolerates_missing_fields():
    text = "0, NVIDIA A100-SXM4-40GB, GPU-a, 40960, Enabled\n\n1, NVIDIA A10G, GPU-b, [N/A]\n"
    first, second = parse_query_gpu(text)
    assert (first.name, first.mig_enabled) == ("A100", True)
    assert (second.name, second.memory_bytes, second.mig_enabled) == ("A10G", 0, False)


@pytest.mark.parametrize(
    "text",
    ["No devices were found", "GPU 0, Tesla T4, GPU-x, 15360", "0, Tesla T4"],
    ids=["message", "bad-index", "too-few-fields"],
)
def test_parse_query_gpu_rejects_other_output(text):
    with pytest.raises(ValueError, match="INDEX, NAME, UUID, MEMORY_MIB"):
        parse_query_gpu(text)


def test_parse_list_gpus_mig():
    assert parse_list_gpus(recorded("a100-mig", "list-gpus.txt")) == {
        0: (
            MigSlice(0, "3g.20gb", "MIG-8e81973e-0bec-47b0-b898-d190f9ebdacc"),
            MigSlice(0, "2g.10gb", "MIG-6b4cb242-4a23-4596-a217-beaddbc496cb"),
            MigSlice(0, "1g.5gb", "MIG-92276658-1e27-41c0-8a6a-63ec24ede6a4"),
            MigSlice(0, "1g.5gb", "MIG-ae97ba94-d0ed-482f-8f6d-05584ef8aa38"),
        )
    }


def test_parse_list_gpus_without_mig():
    assert parse_list_gpus(recorded("h100x8", "list-gpus.txt")) == {i: () for i in range(8)}


def test_parse_list_gpus_rejects_orphan_mig_line():
    with pytest.raises(ValueError, match="MIG device before any GPU"):
        parse_list_gpus("  MIG 1g.5gb      Device  0: (UUID: MIG-x)\n")


# --- detect_gpus through a fake nvidia-smi ------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_detect_gpus_runs_nvidia_smi(shape, tmp_path, monkeypatch):
    use_fake_nvidia_smi(tmp_path, monkeypatch, shape)
    gpus = detect_gpus()
    assert gpus == recorded_gpus(shape)
    assert gpus  # the fake was really run


def test_detect_gpus_mig_shape(tmp_path, monkeypatch):
    use_fake_nvidia_smi(tmp_path, monkeypatch, "a100-mig")
    (gpu,) = detect_gpus()
    assert (gpu.name, gpu.mig_enabled) == ("A100", True)
    assert [s.profile for s in gpu.mig] == ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]


def test_detect_gpus_without_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert detect_gpus() == ()


def write_script(tmp_path: Path, body: str) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\n" + body)
    fake.chmod(0o755)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
            'driver."\nexit 9\n',
            "exited with 9: NVIDIA-SMI has failed",
        ),
        ("echo 'something else entirely'\n", "INDEX, NAME, UUID"),
    ],
    ids=["no-driver", "garbage"],
)
def test_detect_gpus_never_raises(body, message, tmp_path, monkeypatch):
    write_script(tmp_path, body)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.warns(UserWarning, match=f"taskcell: .*{message}"):
        assert detect_gpus() == ()


# --- detect_gpus through NVML -------------------------------------------------------------------


class FakeNVMLError(Exception):
    pass


def fake_pynvml(gpus: tuple[GpuInfo, ...], *, mig_names: bool = True, init_fails: bool = False):
    """A pynvml module over ``gpus``: handles are (gpu index,) or (gpu index, slice position)."""
    sizes = {"1g.5gb": (1, 4864), "2g.10gb": (2, 9984), "3g.20gb": (3, 19968)}
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = FakeNVMLError
    nvml.NVML_DEVICE_MIG_ENABLE = 1
    calls = []

    def init():
        calls.append("init")
        if init_fails:
            raise FakeNVMLError("Driver Not Loaded")

    def name(handle):
        gpu = gpus[handle[0]]
        if len(handle) == 1:
            return gpu.product.encode()  # old bindings return bytes
        return f"{gpu.product} MIG {gpu.mig[handle[1]].profile}" if mig_names else gpu.product

    def mig_mode(handle):
        gpu = gpus[handle[0]]
        if gpu.name == "T4":
            raise FakeNVMLError("Not Supported")
        return (int(gpu.mig_enabled), int(gpu.mig_enabled))

    def mig_handle(handle, position):
        if position >= len(gpus[handle[0]].mig):
            raise FakeNVMLError("Not Found")
        return (handle[0], position)

    def attributes(handle):
        slices, megabytes = sizes[gpus[handle[0]].mig[handle[1]].profile]
        return types.SimpleNamespace(gpuInstanceSliceCount=slices, memorySizeMB=megabytes)

    def uuid(handle):
        gpu = gpus[handle[0]]
        return gpu.uuid if len(handle) == 1 else gpu.mig[handle[1]].uuid

    nvml.nvmlInit = init
    nvml.nvmlShutdown = lambda: calls.append("shutdown")
    nvml.nvmlDeviceGetCount = lambda: len(gpus)
    nvml.nvmlDeviceGetHandleByIndex = lambda index: (index,)
    nvml.nvmlDeviceGetName = name
    nvml.nvmlDeviceGetUUID = uuid
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=gpus[h[0]].memory_bytes)
    nvml.nvmlDeviceGetMigMode = mig_mode
    nvml.nvmlDeviceGetMaxMigDeviceCount = lambda handle: 7
    nvml.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle
    nvml.nvmlDeviceGetAttributes = attributes
    nvml.calls = calls
    return nvml


@pytest.mark.parametrize("mig_names", [True, False], ids=["mig-named", "old-driver"])
@pytest.mark.parametrize("shape", SHAPES)
def test_detect_gpus_through_nvml(shape, mig_names, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: only NVML can answer
    nvml = fake_pynvml(recorded_gpus(shape), mig_names=mig_names)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert detect_gpus() == recorded_gpus(shape)
    assert nvml.calls == ["init", "shutdown"]


def test_detect_gpus_falls_back_to_nvidia_smi_when_nvml_fails(tmp_path, monkeypatch):
    use_fake_nvidia_smi(tmp_path, monkeypatch, "t4")
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml((), init_fails=True))
    assert detect_gpus() == recorded_gpus("t4")


# --- detect_machine -----------------------------------------------------------------------------


def test_detect_machine(tmp_path, monkeypatch):
    use_fake_nvidia_smi(tmp_path, monkeypatch, "t4")
    facts = detect_machine(tmp_path)
    assert facts.cores >= 1
    assert facts.memory_bytes > 0
    assert facts.gpus == recorded_gpus("t4")
    assert facts.scratch_bytes > 0
    assert facts.shm_bytes >= 0


def test_detect_machine_scratch_defaults_to_temp_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(detect, "detect_gpus", lambda: ())
    monkeypatch.setattr(detect.tempfile, "gettempdir", lambda: str(tmp_path / "missing"))
    assert detect_machine().scratch_bytes == 0  # measured there, and absent


# --- advertised_resources -----------------------------------------------------------------------

CORES, MEMORY, SHM, SCRATCH = 16, 64 * GiB, 8 * GiB, 400 * GiB


def facts_for(shape: str | None) -> MachineFacts:
    gpus = recorded_gpus(shape) if shape else ()
    return MachineFacts(
        cores=CORES, memory_bytes=MEMORY, gpus=gpus, shm_bytes=SHM, scratch_bytes=SCRATCH
    )


def base(nprocs: int) -> dict[str, float]:
    return {
        "CPU": CORES // nprocs,
        "MEMORY": MEMORY // nprocs,
        "SHM": SHM // nprocs,
        "DISK": SCRATCH // nprocs,
    }


MIG_UUIDS = [s.uuid for s in recorded_gpus("a100-mig")[0].mig]

# (shape, nprocs) -> [(device resources, CUDA_VISIBLE_DEVICES), ...] one per process
EXPECTED_DEVICES = {
    ("t4", 1): [({"GPU": 1, "GPU-T4": 1}, "0")],
    ("t4", 2): [({"GPU": 1, "GPU-T4": 1}, "0"), ({}, "")],
    ("t4", 8): [({"GPU": 1, "GPU-T4": 1}, "0")] + [({}, "")] * 7,
    ("h100x8", 1): [({"GPU": 8, "GPU-H100": 8}, "0,1,2,3,4,5,6,7")],
    ("h100x8", 2): [
        ({"GPU": 4, "GPU-H100": 4}, "0,1,2,3"),
        ({"GPU": 4, "GPU-H100": 4}, "4,5,6,7"),
    ],
    ("h100x8", 8): [({"GPU": 1, "GPU-H100": 1}, str(i)) for i in range(8)],
    ("a100-mig", 1): [
        (
            {"MIG-A100-3g.20gb": 1, "MIG-A100-2g.10gb": 1, "MIG-A100-1g.5gb": 2},
            ",".join(MIG_UUIDS),
        )
    ],
    ("a100-mig", 2): [
        ({"MIG-A100-3g.20gb": 1, "MIG-A100-2g.10gb": 1}, ",".join(MIG_UUIDS[:2])),
        ({"MIG-A100-1g.5gb": 2}, ",".join(MIG_UUIDS[2:])),
    ],
    ("a100-mig", 8): [
        ({"MIG-A100-3g.20gb": 1}, MIG_UUIDS[0]),
        ({"MIG-A100-2g.10gb": 1}, MIG_UUIDS[1]),
        ({"MIG-A100-1g.5gb": 1}, MIG_UUIDS[2]),
        ({"MIG-A100-1g.5gb": 1}, MIG_UUIDS[3]),
    ]
    + [({}, "")] * 4,
}


@pytest.mark.parametrize(
    ("shape", "nprocs"), list(EXPECTED_DEVICES), ids=[f"{s}-n{n}" for s, n in EXPECTED_DEVICES]
)
def test_advertised_resources(shape, nprocs):
    shares = advertised_resources(facts_for(shape), nprocs)
    assert shares == [
        WorkerShare({**base(nprocs), **devices}, visible)
        for devices, visible in EXPECTED_DEVICES[shape, nprocs]
    ]


def test_advertised_resources_are_floats_in_a_stable_order():
    (share,) = advertised_resources(facts_for("h100x8"))
    assert list(share.resources) == ["CPU", "MEMORY", "SHM", "DISK", "GPU", "GPU-H100"]
    assert all(type(value) is float for value in share.resources.values())


def test_no_gpus_leaves_cuda_visible_devices_alone():
    shares = advertised_resources(facts_for(None), 2)
    assert shares == [WorkerShare(base(2), None)] * 2
    assert shares[0].environ() == {}


def test_environ_pins_cuda_to_pci_order():
    first, second = advertised_resources(facts_for("t4"), 2)
    assert first.environ() == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"}
    assert second.environ()["CUDA_VISIBLE_DEVICES"] == ""  # hides the T4 from this process


def test_mig_mode_without_slices_advertises_nothing():
    gpu = GpuInfo(
        index=0,
        name="A100",
        product="NVIDIA A100-SXM4-40GB",
        uuid="GPU-x",
        memory_bytes=40 * GiB,
        mig=(),
        mig_enabled=True,
    )
    (share,) = advertised_resources(
        MachineFacts(cores=4, memory_bytes=GiB, gpus=(gpu,), shm_bytes=0, scratch_bytes=0)
    )
    assert share == WorkerShare({"CPU": 4, "MEMORY": GiB}, "")


def test_mixed_machine_deals_whole_gpus_and_slices_in_order():
    mig = recorded_gpus("a100-mig")[0]
    t4 = GpuInfo(index=1, name="T4", product="Tesla T4", uuid="GPU-t4", memory_bytes=15 * GiB)
    first, second = advertised_resources(
        MachineFacts(cores=8, memory_bytes=8 * GiB, gpus=(mig, t4), shm_bytes=0, scratch_bytes=0), 2
    )
    assert first.visible_devices == ",".join(MIG_UUIDS[:3])
    assert second.visible_devices == f"{MIG_UUIDS[3]},1"
    assert second.resources == {
        "CPU": 4,
        "MEMORY": 4 * GiB,
        "GPU": 1,
        "GPU-T4": 1,
        "MIG-A100-1g.5gb": 1,
    }


def test_more_processes_than_cores_still_get_one_cpu():
    shares = advertised_resources(
        MachineFacts(cores=2, memory_bytes=3 * GiB, gpus=(), shm_bytes=0, scratch_bytes=0), 3
    )
    assert [share.resources["CPU"] for share in shares] == [1, 1, 1]


@pytest.mark.parametrize("nprocs", [0, -1, 1.5, True], ids=repr)
def test_advertised_resources_rejects_bad_nprocs(nprocs):
    with pytest.raises(ValueError, match=rf"nprocs= must be a positive integer .*got {nprocs!r}"):
        advertised_resources(facts_for(None), nprocs)


# --- the effective memory limit: nested cgroups and --memory-limit -------------------------------


def _cgroup_tree(tmp_path, version: int, limits: dict[str, str]) -> tuple[str, str]:
    """A cgroup hierarchy under ``tmp_path`` with ``limits`` (relative dir -> limit file
    text), and the /proc/self/cgroup and mountinfo files of a process in ``a/b``."""
    mount = tmp_path / "cgroup"
    name = "memory.max" if version == 2 else "memory.limit_in_bytes"
    for relative, text in limits.items():
        folder = mount / relative if relative else mount
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text + "\n")
    cgroup = tmp_path / "cgroup.txt"
    mountinfo = tmp_path / "mountinfo.txt"
    if version == 2:
        cgroup.write_text("0::/a/b\n")
        mountinfo.write_text(f"30 23 0:26 / {mount} rw,nosuid - cgroup2 cgroup2 rw\n")
    else:
        cgroup.write_text("4:memory:/a/b\n1:cpu,cpuacct:/\n")
        mountinfo.write_text(f"35 31 0:32 / {mount} rw,relatime - cgroup cgroup rw,memory\n")
    return str(cgroup), str(mountinfo)


@pytest.mark.parametrize("version", [1, 2])
def test_a_nested_cgroup_limit_is_the_one_that_holds(tmp_path, version):
    unlimited = "max" if version == 2 else "9223372036854771712"
    files = _cgroup_tree(tmp_path, version, {"": unlimited, "a": str(4 << 30), "a/b": unlimited})
    assert detect.cgroup_memory_limit(*files) == 4 << 30
    files = _cgroup_tree(tmp_path, version, {"a/b": str(1 << 30)})
    assert detect.cgroup_memory_limit(*files) == 1 << 30


def test_no_cgroup_limit_is_none(tmp_path):
    assert detect.cgroup_memory_limit(*_cgroup_tree(tmp_path, 2, {"": "max"})) is None
    assert detect.cgroup_memory_limit(str(tmp_path / "absent"), str(tmp_path / "absent")) is None


def _own_memory_cgroup() -> str | None:
    """This process's v1 memory cgroup directory, where it can make one inside it."""
    try:
        with open("/proc/self/cgroup") as f:
            line = next(x for x in f if ":memory:" in x)
    except (OSError, StopIteration):
        return None
    folder = "/sys/fs/cgroup/memory" + line.strip().split(":", 2)[2]
    return folder if os.access(folder, os.W_OK) else None


@pytest.mark.skipif(_own_memory_cgroup() is None, reason="no writable cgroup v1 memory hierarchy")
def test_a_process_in_a_real_nested_cgroup_advertises_its_limit(tmp_path):
    folder = os.path.join(_own_memory_cgroup(), f"taskcell-test-{os.getpid()}")
    os.mkdir(folder)
    try:
        with open(os.path.join(folder, "memory.limit_in_bytes"), "w") as f:
            f.write(str(1 << 30))
        code = (
            f"open({folder + '/cgroup.procs'!r}, 'w').write(str(__import__('os').getpid()))\n"
            "from taskcell.cluster import detect\n"
            "print(detect.detect_machine().memory_bytes)"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) == 1 << 30
    finally:
        os.rmdir(folder)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--memory-limit", "1GiB"], 1 << 30),
        (["--nthreads", "2", "--memory-limit=4e9"], 4_000_000_000),
        (["--memory-limit", "0.5"], 8 << 30),
        (["--memory-limit", "auto"], None),
        (["--memory-limit", "0"], None),
        ([], None),
    ],
)
def test_the_workers_memory_limit_option_caps_what_it_advertises(args, expected):
    assert detect.memory_limit_option(args, 16 << 30) == expected
    share = detect.WorkerShare({"CPU": 4.0, "MEMORY": float(16 << 30)}, None)
    (capped,) = detect.cap_memory([share], expected)
    assert capped.resources["MEMORY"] == float(expected or 16 << 30)


def test_a_memory_limit_dask_would_refuse_is_refused():
    with pytest.raises(ValueError, match="--memory-limit"):
        detect.memory_limit_option(["--memory-limit", "lots"], 1 << 30)
