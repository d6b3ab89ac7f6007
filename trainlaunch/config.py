"""Configuration files: launcher defaults per project and per user (docs/configuration.md).

API (what the CLI wires)::

    cfg = load_config()                    # cwd=None -> os.getcwd(), environ=None -> os.environ
    cfg.default_scheduler()                # TRAINLAUNCH_SCHEDULER > project > user > "local"
    cfg.scheduler_cfg("slurm")             # [scheduler.slurm] options: project over user, per key
    cfg.scheduler_cfg("slurm", opts)       # the same, each file's table checked against opts
    cfg.component_defaults("dist.ddp")     # [component."dist.ddp"]: project over user, per key
    cfg.run_settings({"seed": 7, ...})     # cli > env > project > user > built-in, typed
    cfg.run_settings_with_origin(cli)      # the same, each value with where it came from
    cfg.sources                            # the files read, highest precedence first

Files. The *project file* is the nearest ``.trainlaunch.toml``, or ``pyproject.toml`` with a
``[tool.trainlaunch]`` table, found from cwd upward; the search stops after the directory
holding ``.git`` (the repository root) or at the filesystem root. In one directory
``.trainlaunch.toml`` wins. ``TRAINLAUNCH_CONFIG=PATH`` names the project file instead (no
search); ``TRAINLAUNCH_CONFIG=''`` means no project file. The *user file* is
``$XDG_CONFIG_HOME/trainlaunch/config.toml`` (default ``~/.config/trainlaunch/config.toml``).

Schema (both files; in pyproject.toml everything sits under ``[tool.trainlaunch]``)::

    [run]                        # defaults for `trainlaunch run`
    scheduler = "slurm"          # the default scheduler
    seed = 1234                  # seed, export_strategy, export_rank, export_sample_rate,
    export_strategy = "sampled"  # metrics_path: the rank settings (settings.RankSettings)
    [scheduler.slurm]            # options of one scheduler (checked by its runopts later)
    partition = "gpu"
    [component."dist.ddp"]       # argument defaults of one component; the command line wins
    nproc_per_node = 8

The default scheduler lives in ``[run]`` because TOML cannot hold both a top-level
``scheduler = "..."`` and ``[scheduler.NAME]`` tables. Unknown keys, wrong types and malformed
TOML are UsageErrors naming the file (and the key or line).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainlaunch import settings
from trainlaunch.errors import UsageError
from trainlaunch.options import current_dir
from trainlaunch.schedulers import ALIASES as SCHEDULER_ALIASES
from trainlaunch.schedulers import DEFAULT_SCHEDULER
from trainlaunch.values import frozen

if TYPE_CHECKING:
    from trainlaunch.options import runopts

PROJECT_FILE = ".trainlaunch.toml"
PYPROJECT = "pyproject.toml"
USER_FILE = ("trainlaunch", "config.toml")  # under $XDG_CONFIG_HOME or ~/.config
RUN_KEYS = ("seed", "export_strategy", "export_rank", "export_sample_rate", "metrics_path")
_RUN_TYPES: dict[str, tuple[type, ...]] = {
    "scheduler": (str,),
    "seed": (int,),
    "export_strategy": (str,),
    "export_rank": (int,),
    "export_sample_rate": (int, float),
    "metrics_path": (str,),
}
_ENV = {
    "seed": settings.SEED,
    "export_strategy": settings.EXPORT_STRATEGY,
    "export_rank": settings.EXPORT_RANK,
    "export_sample_rate": settings.EXPORT_SAMPLE_RATE,
    "metrics_path": settings.METRICS_PATH,
}
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(settings.RankSettings)}
_TOP = ("run", "scheduler", "component")


@frozen
class ConfigFile:
    """One file that was read, already validated."""

    path: str
    prefix: str  # "tool.trainlaunch." inside pyproject.toml, else ""
    run: Mapping[str, Any]
    schedulers: Mapping[str, Mapping[str, Any]]
    components: Mapping[str, Mapping[str, Any]]


@frozen
class Config:
    """The merged view of the project file, the user file and the environment."""

    project: ConfigFile | None = None
    user: ConfigFile | None = None
    environ: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def sources(self) -> tuple[str, ...]:
        """The files read, highest precedence first."""
        return tuple(f.path for f in self._files())

    def _files(self) -> list[ConfigFile]:
        return [f for f in (self.project, self.user) if f is not None]

    def default_scheduler(self) -> str:
        """The scheduler for `run`: environment > project [run] scheduler > user > "local"."""
        env = self.environ.get(settings.SCHEDULER, "").strip()
        if env:
            return env
        for f in self._files():
            if "scheduler" in f.run:
                return str(f.run["scheduler"])
        return DEFAULT_SCHEDULER

    def configured_schedulers(self) -> list[str]:
        """local, the default scheduler and every scheduler a file has a table for (what a
        live view shows without ``-s``)."""
        names = [DEFAULT_SCHEDULER, self.default_scheduler()]
        for f in self._files():
            names += list(f.schedulers)
        return list(dict.fromkeys(names))

    def scheduler_cfg(self, name: str, opts: runopts | None = None) -> dict[str, Any]:
        """Options of one scheduler (aliases such as k8s accepted), project over user; with the
        backend's opts, each file's table is checked first, so that a mistake names its file
        and table (``.trainlaunch.toml: [scheduler.local]: unknown option 'grace_periode'``)."""
        name = SCHEDULER_ALIASES.get(name, name)
        out: dict[str, Any] = {}
        for f in reversed(self._files()):  # user first, so project keys overwrite
            table = f.schedulers.get(name, {})
            if opts is not None:
                try:
                    opts.check(table, name)
                except UsageError as e:
                    where = f"{f.path}: [{f.prefix}scheduler.{name}]"
                    raise UsageError(f"{where}: {e.message}", hint=e.hint) from None
            out.update(table)
        return out

    def component_defaults(self, name: str) -> dict[str, Any]:
        """Argument defaults for a component, by the name typed on the command line."""
        out: dict[str, Any] = {}
        for f in reversed(self._files()):
            out.update(f.components.get(name, {}))
        return out

    def run_settings(self, cli: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """seed, export_strategy, export_rank, export_sample_rate, metrics_path, typed.

        ``cli`` holds command-line values; None means "not given".
        """
        return {k: v for k, (v, _) in self.run_settings_with_origin(cli).items()}

    def run_settings_with_origin(
        self, cli: Mapping[str, Any] | None = None
    ) -> dict[str, tuple[Any, str]]:
        """Like run_settings, each value paired with where it came from."""
        cli = dict(cli or {})
        unknown = set(cli) - set(RUN_KEYS)
        if unknown:  # a programming error in the caller, not a user error
            raise ValueError(f"unknown run settings {sorted(unknown)}; known: {RUN_KEYS}")
        out: dict[str, tuple[Any, str]] = {}
        for key in RUN_KEYS:
            out[key] = self._run_value(key, cli.get(key))
        return out

    def _run_value(self, key: str, cli_value: Any) -> tuple[Any, str]:
        if cli_value is not None:
            return _checked(key, cli_value, "--" + key.replace("_", "-")), "command line"
        var = _ENV[key]
        raw = self.environ.get(var, "").strip()
        # inside a rank these were injected for the rank's own app, not set by the user: a
        # nested `run` gets its own seed and metrics (pass --seed "$TRAINLAUNCH_SEED" to share)
        if raw and not self.environ.get(settings.HANDLE):
            return _checked(key, _parse_env(key, var, raw), var), f"environment {var}"
        for f in self._files():
            if key in f.run:
                return f.run[key], f"{f.path} ({f.prefix}run.{key})"
        return _DEFAULTS[key], "default"


def load_config(cwd: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Find, read and validate the project and user files."""
    env = dict(os.environ if environ is None else environ)
    start = Path(cwd or current_dir())
    project = _project_file(start, env)
    user_path = user_config_path(env)
    user = None
    if user_path.is_file() and not (project and _same_file(project.path, user_path)):
        user = _validate(user_path, _read_toml(user_path), "")
    return Config(project=project, user=user, environ=env)


def user_config_path(environ: Mapping[str, str]) -> Path:
    """$XDG_CONFIG_HOME/trainlaunch/config.toml, else ~/.config/trainlaunch/config.toml."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        return Path(xdg, *USER_FILE)
    home = environ.get("HOME") or str(Path.home())
    return Path(home, ".config", *USER_FILE)


def find_project_file(start: Path) -> Path | None:
    """The nearest project file from start upward (stops after the .git directory's level)."""
    d = start.resolve()
    while True:
        if (d / PROJECT_FILE).is_file():
            return d / PROJECT_FILE
        py = d / PYPROJECT
        if py.is_file() and "trainlaunch" in _read_toml(py).get("tool", {}):
            return py
        if (d / ".git").exists() or d.parent == d:
            return None
        d = d.parent


def _project_file(start: Path, env: Mapping[str, str]) -> ConfigFile | None:
    if settings.CONFIG in env:
        explicit = env[settings.CONFIG].strip()
        if not explicit:
            return None
        path = Path(explicit).expanduser()
        path = path if path.is_absolute() else start / path
        if not path.is_file():
            raise UsageError(
                f"{settings.CONFIG} names {explicit!r}, which is not a file",
                hint=f"looked for {path}; set {settings.CONFIG}='' for no file",
            )
    else:
        found = find_project_file(start)
        if found is None:
            return None
        path = found
    data = _read_toml(path)
    if path.name != PYPROJECT:
        return _validate(path, data, "")
    table = data.get("tool", {}).get("trainlaunch")
    if not isinstance(table, dict):
        raise UsageError(
            f"{path}: no [tool.trainlaunch] table",
            hint="add one, or name a .trainlaunch.toml instead",
        )
    return _validate(path, table, "tool.trainlaunch.")


def _read_toml(path: Path) -> dict[str, Any]:
    # here, not at the top: tomllib's import (~4 ms) is paid only where a config file exists
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:  # the message carries "(at line N, column M)"
        raise UsageError(f"{path}: invalid TOML: {e}", hint="fix the file") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8 only; tomllib lets this one through
        raise UsageError(
            f"{path}: invalid TOML: not UTF-8 text (byte {e.start})",
            hint="save the file as UTF-8",
        ) from None
    except OSError as e:
        raise UsageError(f"cannot read config file {path}: {e.strerror or e}") from None


def _validate(path: Path, data: Mapping[str, Any], prefix: str) -> ConfigFile:
    """Check the shape and the run values of one file."""
    where = str(path)
    _known(where, prefix, data, _TOP)
    run = _table(where, prefix + "run", data.get("run", {}))
    _known(where, prefix + "run.", run, tuple(_RUN_TYPES))
    checked_run = {k: _run_file_value(where, f"{prefix}run.{k}", k, v) for k, v in run.items()}
    schedulers: dict[str, dict[str, Any]] = {}
    for name, opts in _table(where, prefix + "scheduler", data.get("scheduler", {})).items():
        key = f"{prefix}scheduler.{name}"
        if not isinstance(opts, dict):
            hint = (
                f'the default scheduler is set in [run]: scheduler = "{opts}"'
                if isinstance(opts, str)
                else None
            )
            raise UsageError(f"{where}: {key} must be a table of options", hint=hint)
        canon = SCHEDULER_ALIASES.get(name, name)
        if canon in schedulers:
            raise UsageError(f"{where}: {key} repeats [scheduler.{canon}] under another name")
        schedulers[canon] = {k: _option_value(where, f"{key}.{k}", v) for k, v in opts.items()}
    components: dict[str, dict[str, Any]] = {}
    for name, args in _table(where, prefix + "component", data.get("component", {})).items():
        key = f'{prefix}component."{name}"'
        if not isinstance(args, dict):
            raise UsageError(f"{where}: {key} must be a table of argument defaults")
        if (
            "." not in name
            and ":" not in name
            and args
            and all(isinstance(v, dict) for v in args.values())
        ):
            sub = next(iter(args))
            raise UsageError(
                f"{where}: [{prefix}component.{name}.{sub}] splits the component name at its dot",
                hint=f'quote the name: [{prefix}component."{name}.{sub}"]',
            )
        components[name] = dict(args)
    return ConfigFile(where, prefix, checked_run, schedulers, components)


def _table(where: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        hint = (
            'the default scheduler is set in [run]: scheduler = "..."'
            if key.endswith("scheduler") and isinstance(value, str)
            else None
        )
        raise UsageError(f"{where}: {key} must be a table, got {type(value).__name__}", hint=hint)
    return value


def _known(where: str, prefix: str, table: Mapping[str, Any], valid: tuple[str, ...]) -> None:
    for key in table:
        if key not in valid:
            import difflib  # only for the hint of a mistyped key

            close = difflib.get_close_matches(key, valid, n=1)
            hint = (
                f"did you mean {close[0]!r}? " if close else ""
            ) + f"valid keys: {', '.join(valid)}"
            raise UsageError(f"{where}: unknown key {prefix + key!r}", hint=hint)


def _run_file_value(where: str, dotted: str, key: str, value: Any) -> Any:
    types = _RUN_TYPES[key]
    if isinstance(value, bool) or not isinstance(value, types):
        want = " or ".join(t.__name__ for t in types)
        raise UsageError(f"{where}: {dotted} must be {want}, got {value!r}")
    if key == "scheduler":
        if not str(value).strip():
            raise UsageError(f"{where}: {dotted} must not be empty")
        return value
    return _checked(key, value, f"{where}: {dotted}")


def _checked(key: str, value: Any, origin: str) -> Any:
    """Validate one rank setting alone (RankSettings checks it), naming where it came from."""
    if key == "export_sample_rate" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    try:
        settings.RankSettings(**{key: value})
    except UsageError as e:
        raise UsageError(f"{origin}: {e.message}", hint=e.hint) from None
    return value


def _parse_env(key: str, var: str, raw: str) -> Any:
    return settings.parse_env_value(var, raw)


def _option_value(where: str, dotted: str, value: Any) -> Any:
    """Scheduler options: scalars, lists of strings, or tables of strings (runopts types)."""
    ok = (
        isinstance(value, (str, int, float, bool))
        or (isinstance(value, list) and all(isinstance(x, str) for x in value))
        or (isinstance(value, dict) and all(isinstance(x, str) for x in value.values()))
    )
    if not ok:
        raise UsageError(
            f"{where}: {dotted} must be a string, number, boolean, list of "
            f"strings or table of strings, got {value!r}"
        )
    return value


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
