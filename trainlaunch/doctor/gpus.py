"""Each GPU's health through NVML: ``nvidia-smi --query-gpu`` (or pynvml when it is installed
and nvidia-smi is not), and the Xid errors the driver logged in the kernel log."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Mapping

from trainlaunch.doctor.values import Check, fail, ok, skip, warn

SMI_TIMEOUT_S = 20.0
QUERY = (
    "index",
    "name",
    "driver_version",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "ecc.errors.uncorrected.volatile.total",
    "retired_pages.pending",
    "temperature.gpu",
)
BUSY_PERCENT = 10  # a GPU this busy, or with this share of its memory used, has another user
_XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def checks() -> list[Check]:
    """The driver, one line per GPU, and the Xid errors; "no GPU" when there is none."""
    rows, why = _nvidia_smi()
    if rows is None:
        rows, why = _pynvml()
    if rows is None:
        return [ok("gpu", f"no GPU ({why})")]
    if not rows:
        return [ok("gpu", "no GPU (nvidia-smi lists none)")]
    out = [ok("driver", f"NVIDIA {rows[0].get('driver_version', '?')}")]
    out += [_gpu(row) for row in rows]
    out.append(xid())
    return out


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:  # [N/A], [Not Supported]
        return None


def _gpu(row: Mapping[str, str]) -> Check:
    name = f"gpu {row.get('index', '?')}"
    util = _number(row.get("utilization.gpu"))
    used, total = _number(row.get("memory.used")), _number(row.get("memory.total"))
    ecc = _number(row.get("ecc.errors.uncorrected.volatile.total"))
    pending = (row.get("retired_pages.pending") or "").strip().lower()
    detail = f"{row.get('name', '?')}"
    if util is not None and used is not None and total:
        detail += f", {util:.0f}% busy, {used:.0f}/{total:.0f} MiB used"
    if ecc:
        return fail(
            name,
            f"{detail}; {ecc:.0f} uncorrected ECC errors since the driver loaded",
            "drain the node and reset the GPU (nvidia-smi -r), or exclude the node",
        )
    if pending == "yes":
        return warn(name, f"{detail}; retired pages pending", "reboot the node to retire them")
    if (util or 0) >= BUSY_PERCENT or (
        used is not None and total and used / total * 100 >= BUSY_PERCENT
    ):
        return warn(name, f"{detail}: another process uses it", "nvidia-smi shows who")
    return ok(name, detail)


def _nvidia_smi() -> tuple[list[dict[str, str]] | None, str]:
    return smi_query("gpu", QUERY)


def smi_query(
    what: str, fields: tuple[str, ...], timeout: float = SMI_TIMEOUT_S
) -> tuple[list[dict[str, str]] | None, str]:
    """``nvidia-smi --query-WHAT=FIELDS`` as one dict per row (None and why when it fails)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None, "nvidia-smi not found"
    try:
        proc = subprocess.run(
            [smi, f"--query-{what}={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"nvidia-smi: {e}"
    if proc.returncode != 0:
        last = (proc.stdout + proc.stderr).strip().splitlines()
        return None, f"nvidia-smi: {last[-1] if last else f'exit code {proc.returncode}'}"
    rows = []
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(fields):
            rows.append(dict(zip(fields, cells, strict=True)))
    return rows, ""


def _pynvml() -> tuple[list[dict[str, str]] | None, str]:
    """The same rows through pynvml (nvidia-ml-py), where it is installed."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None, "nvidia-smi not found, pynvml not installed"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 (NVMLError_*: no driver)
        return None, f"NVML: {e}"
    rows = []
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            row = {
                "index": str(i),
                "name": str(pynvml.nvmlDeviceGetName(h)),
                "driver_version": str(driver),
                "utilization.gpu": str(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                "memory.used": str(mem.used >> 20),
                "memory.total": str(mem.total >> 20),
            }
            with contextlib.suppress(Exception):  # NVMLError_NotSupported: no ECC here
                row["ecc.errors.uncorrected.volatile.total"] = str(
                    pynvml.nvmlDeviceGetTotalEccErrors(h, 1, 0)  # uncorrected, volatile
                )
            rows.append(row)
    finally:
        pynvml.nvmlShutdown()
    return rows, ""


def xid() -> Check:
    """Xid errors the NVIDIA driver logged in the kernel log since boot."""
    dmesg = shutil.which("dmesg")
    if not dmesg:
        return skip("xid", "no dmesg to read the kernel log")
    try:
        proc = subprocess.run([dmesg], capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        return skip("xid", f"dmesg: {e}")
    if proc.returncode != 0:
        return skip("xid", "the kernel log is not readable here (dmesg needs CAP_SYSLOG)")
    found = _XID.findall(proc.stdout)
    if not found:
        return ok("xid", "no Xid errors in the kernel log")
    codes = sorted({int(code) for _, code in found})
    return warn(
        "xid",
        f"{len(found)} Xid error(s) since boot (codes {', '.join(map(str, codes))}; last on {found[-1][0]})",
        "see NVIDIA's Xid table; 48/63/64/74/79/94/95 usually mean: drain the node",
    )
