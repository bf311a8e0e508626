"""System metrics of a training run, sampled on a thread of their own: what the GPUs, the
process and the machine are doing, as telemetry under ``sys/``.

Series (``i``: the CUDA device index the process sees; GB means 2**30 bytes, as
autoresearch's ``train.py`` computes ``memory_gb``)

==============================================  =============================================
``sys/gpu{i}/memory_allocated_gb``               torch's caching allocator: live tensors
``sys/gpu{i}/memory_reserved_gb``                ... memory it holds from the driver
``sys/gpu{i}/memory_peak_gb``                    ... peak of allocated (``max_memory_allocated``)
``sys/gpu{i}/utilization_pct``                   NVML: the device's utilisation (all processes)
``sys/gpu{i}/memory_used_gb``                    NVML: the device's used memory (all processes)
``sys/gpu{i}/process_memory_gb``                 NVML: this process's memory on the device
``sys/gpu{i}/temperature_c``, ``power_w``        NVML
``sys/proc/rss_gb``, ``sys/proc/cpu_pct``         this process (cpu: percent of one core)
``sys/cpu_pct``, ``sys/memory_pct``              the machine
==============================================  =============================================

Sources, each used only when present: ``torch.cuda`` when the process has already
imported torch and initialised CUDA (the sampler never initialises it, nor imports torch);
NVML through ``pynvml`` when it imports and initialises (devices follow
``CUDA_VISIBLE_DEVICES``); the process and the machine through ``psutil``, else Linux's
``/proc``. What is missing (no GPU, no NVML, a metric a device does not support) is left
out without a word.

The run's peak GPU memory (:attr:`SystemSampler.peak_gpu_gb`): the largest
``max_memory_allocated`` over devices and samples (torch), else the largest NVML
per-process memory; None without either. The client stores it as the trial's
``extra["memory_gb"]``.

Cost: a sample reads a few counters (tens to hundreds of microseconds of CPU, off the
training thread). When one costs more than ``budget`` (0.5%) of the interval, the interval
doubles (up to 10 minutes), so the sampler never takes more than that share of the time.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_INTERVAL_S", "SystemSampler", "sampler_settings"]

log = logging.getLogger("trainer_hooks.client")

GB = float(2**30)
DEFAULT_INTERVAL_S = 10.0
MAX_INTERVAL_S = 600.0
DEFAULT_BUDGET = 0.005


def sampler_settings(system_metrics: bool | float | None) -> float | None:
    """The sampling interval in seconds, or None for no sampler: ``system_metrics`` False is
    off, True the default interval, a number the interval; None reads
    ``LINEAGE_SYSTEM_METRICS`` (``0``/``off``/``false``/``no``: off; a number: the interval;
    else on)."""
    if system_metrics is None:
        raw = os.environ.get("LINEAGE_SYSTEM_METRICS", "").strip().lower()
        if raw in ("0", "off", "false", "no"):
            return None
        try:
            system_metrics = float(raw) if raw not in ("", "1", "on", "true", "yes") else True
        except ValueError:
            raise ValueError(f"LINEAGE_SYSTEM_METRICS must be on, off or an interval in seconds, got {raw!r}") from None
    if system_metrics is False:
        return None
    if system_metrics is True:
        return DEFAULT_INTERVAL_S
    interval = float(system_metrics)
    if not interval > 0:
        raise ValueError(f"system metrics interval must be > 0 seconds, got {system_metrics!r}")
    return interval


# -- sources -----------------------------------------------------------------------------------


class TorchCuda:
    """torch's allocator figures per device, when the process itself initialised CUDA."""

    def read(self, out: dict[str, float]) -> float | None:
        """Adds the series; returns the largest peak of allocated memory (GB), or None."""
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is None or not cuda.is_initialized():
            return None
        peak: float | None = None
        for index in range(cuda.device_count()):
            stats = cuda.memory_stats(index)
            reserved = stats.get("reserved_bytes.all.current", 0)
            top = stats.get("allocated_bytes.all.peak", 0)
            if not reserved and not top:
                continue  # a device this process never used
            out[f"sys/gpu{index}/memory_allocated_gb"] = stats.get("allocated_bytes.all.current", 0) / GB
            out[f"sys/gpu{index}/memory_reserved_gb"] = reserved / GB
            out[f"sys/gpu{index}/memory_peak_gb"] = top / GB
            peak = max(peak or 0.0, top / GB)
        return peak


class Nvml:
    """NVML's device figures (``pynvml``); a metric a device does not support is dropped."""

    def __init__(self) -> None:
        import pynvml  # noqa: PLC0415 - optional

        pynvml.nvmlInit()
        self.nvml = pynvml
        self.pid = os.getpid()
        self.handles = [
            (index, pynvml.nvmlDeviceGetHandleByIndex(nvml_index))
            for index, nvml_index in enumerate(self._visible(pynvml))
        ]
        self.unsupported: set[tuple[int, str]] = set()

    @staticmethod
    def _visible(pynvml: Any) -> list[int]:
        count = pynvml.nvmlDeviceGetCount()
        raw = os.environ.get("CUDA_VISIBLE_DEVICES")
        if raw is None:
            return list(range(count))
        wanted = [part.strip() for part in raw.split(",") if part.strip()]
        if all(part.isdigit() for part in wanted):
            return [int(part) for part in wanted if int(part) < count]
        by_uuid = {}
        for nvml_index in range(count):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(nvml_index))
            by_uuid[uuid.decode() if isinstance(uuid, bytes) else uuid] = nvml_index
        return [by_uuid[u] for part in wanted for u in by_uuid if u.startswith(part)]

    def read(self, out: dict[str, float]) -> float | None:
        """Adds the series; returns this process's largest memory on a device (GB), or None."""
        nvml = self.nvml
        mine: float | None = None
        for index, handle in self.handles:
            prefix = f"sys/gpu{index}/"
            for name, get in (
                ("utilization_pct", lambda h: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
                ("memory_used_gb", lambda h: nvml.nvmlDeviceGetMemoryInfo(h).used / GB),
                ("temperature_c", lambda h: float(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))),
                ("power_w", lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                ("process_memory_gb", self._process_memory),
            ):
                if (index, name) in self.unsupported:
                    continue
                try:
                    value = get(handle)
                except Exception:  # NVMLError_NotSupported and kin: not on this device
                    self.unsupported.add((index, name))
                    continue
                if value is not None:
                    out[prefix + name] = value
                    if name == "process_memory_gb":
                        mine = max(mine or 0.0, value)
        return mine

    def _process_memory(self, handle: Any) -> float | None:
        for proc in self.nvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == self.pid and proc.usedGpuMemory is not None:
                return proc.usedGpuMemory / GB
        return None


class PsutilProcess:
    """The process and the machine through psutil."""

    def __init__(self) -> None:
        import psutil  # noqa: PLC0415 - optional

        self.psutil = psutil
        self.process = psutil.Process()
        self.process.cpu_percent(None)  # the first reading primes the counters
        psutil.cpu_percent(None)

    def read(self, out: dict[str, float]) -> None:
        psutil = self.psutil
        out["sys/proc/rss_gb"] = self.process.memory_info().rss / GB
        out["sys/proc/cpu_pct"] = float(self.process.cpu_percent(None))
        out["sys/cpu_pct"] = float(psutil.cpu_percent(None))
        out["sys/memory_pct"] = float(psutil.virtual_memory().percent)


class ProcProcess:
    """The process and the machine through Linux's ``/proc`` (no psutil)."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.last_proc = (self._proc_ticks(), time.monotonic())
        self.last_cpu = self._cpu_ticks()

    @staticmethod
    def _proc_ticks() -> int:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    @staticmethod
    def _cpu_ticks() -> tuple[int, int]:
        with open("/proc/stat") as fh:
            values = [int(v) for v in fh.readline().split()[1:]]
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        return sum(values), idle

    def read(self, out: dict[str, float]) -> None:
        with open("/proc/self/statm") as fh:
            out["sys/proc/rss_gb"] = int(fh.read().split()[1]) * self.page / GB
        ticks, now = self._proc_ticks(), time.monotonic()
        before, then = self.last_proc
        if now > then:
            out["sys/proc/cpu_pct"] = 100.0 * (ticks - before) / self.ticks / (now - then)
        self.last_proc = (ticks, now)
        total, idle = self._cpu_ticks()
        if total > self.last_cpu[0]:
            out["sys/cpu_pct"] = 100.0 * (1.0 - (idle - self.last_cpu[1]) / (total - self.last_cpu[0]))
        self.last_cpu = (total, idle)
        with open("/proc/meminfo") as fh:
            info = {
                line.split(":")[0]: int(line.split()[1])
                for line in fh
                if line.split()[0] in ("MemTotal:", "MemAvailable:")
            }
        if info.get("MemTotal") and "MemAvailable" in info:
            out["sys/memory_pct"] = 100.0 * (1.0 - info["MemAvailable"] / info["MemTotal"])


def _optional(make: Callable[[], Any]) -> Any:
    try:
        return make()
    except Exception:  # not installed, no driver, no /proc: that source is absent
        return None


# -- the sampler -------------------------------------------------------------------------------


class SystemSampler:
    """Samples every ``interval`` seconds on a daemon thread and hands each sample
    (``name -> value``) to ``emit``; the first sample comes one interval after
    :meth:`start`. Module doc for the series, the sources and the cost rule."""

    def __init__(
        self,
        emit: Callable[[dict[str, float]], None],
        *,
        interval: float = DEFAULT_INTERVAL_S,
        budget: float = DEFAULT_BUDGET,
    ) -> None:
        self.emit = emit
        self.interval = interval
        self.budget = budget
        self.samples = 0
        #: CPU seconds spent sampling (the sampler thread's own clock)
        self.cpu_s = 0.0
        self.peak_gpu_gb: float | None = None
        self._torch = TorchCuda()
        self._nvml: Nvml | None = None
        self._process: PsutilProcess | ProcProcess | None = None
        self._ready = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _prepare(self) -> None:
        if not self._ready:
            self._ready = True
            self._nvml = _optional(Nvml)
            self._process = _optional(PsutilProcess) or _optional(ProcProcess)

    def sample(self) -> dict[str, float]:
        """One reading of every source present (also updates :attr:`peak_gpu_gb`)."""
        with self._lock:
            self._prepare()
            out: dict[str, float] = {}
            peak = _optional(lambda: self._torch.read(out))
            if peak is None and self._nvml is not None:
                peak = _optional(lambda: self._nvml.read(out))  # type: ignore[union-attr]
            elif self._nvml is not None:
                _optional(lambda: self._nvml.read(out))  # type: ignore[union-attr]
            if self._process is not None:
                _optional(lambda: self._process.read(out))  # type: ignore[union-attr]
            if peak is not None:
                self.peak_gpu_gb = max(self.peak_gpu_gb or 0.0, peak)
            return out

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="ledger-system-metrics", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (no sample after this returns)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _loop(self) -> None:
        with self._lock:
            self._prepare()  # imports and NVML's start-up: once, not counted as a sample's cost
        while not self._stop.wait(self.interval):
            started = time.thread_time()
            try:
                values = self.sample()
                if values and not self._stop.is_set():
                    self.emit(values)
            except Exception:  # never take the trainer down
                log.exception("ledger: system metrics sampler stopped")
                return
            cost = time.thread_time() - started
            self.samples += 1
            self.cpu_s += cost
            if cost > self.budget * self.interval and self.interval < MAX_INTERVAL_S:
                self.interval = min(MAX_INTERVAL_S, self.interval * 2)
                log.info(
                    "ledger: a system metrics sample took %.1f ms; sampling every %g s from now on",
                    cost * 1e3,
                    self.interval,
                )
