"""Typed configuration: commented YAML files plus dotted command-line overrides.

Each section's dataclass lives beside the code that uses it (``DataConfig`` in data.py,
``ModelConfig`` in model.py, ...); this module only composes them, reads YAML, applies
``section.key=value`` overrides and rejects unknown keys and wrong types by name.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from translator.data import DataConfig
from translator.errors import TranslatorError
from translator.model import ModelConfig
from translator.tokenizer import TokenizerConfig
from translator.training import TrainConfig


class ConfigError(TranslatorError):
    """A config file or override that cannot be used as written."""


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def _type_name(expected: Any) -> str:
    return getattr(expected, "__name__", str(expected)).replace("typing.", "")


def _check_value(key: str, value: Any, expected: Any) -> Any:
    """Return ``value`` if it fits the annotated type ``expected`` (ints widen to float)."""
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(expected):
            try:
                return _check_value(key, value, option)
            except ConfigError:
                continue
        raise ConfigError(f"{key} must be {_type_name(expected)}, not {value!r}")
    if expected is type(None):
        if value is None:
            return None
    elif origin is dict:
        key_type, value_type = typing.get_args(expected)
        if isinstance(value, dict):
            return {_check_value(f"{key}.{k}", k, key_type): _check_value(f"{key}.{k}", v,
                    value_type) for k, v in value.items()}
    elif origin is list:
        (item_type,) = typing.get_args(expected)
        if isinstance(value, list):
            return [_check_value(f"{key}[{i}]", v, item_type) for i, v in enumerate(value)]
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 5e-4 (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(value, expected):
        return value
    raise ConfigError(f"{key} must be {_type_name(expected)}, not {value!r}")


def _build(cls: type, values: dict[str, Any], prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in values:
        if key not in known:
            raise ConfigError(
                f"unknown config key '{prefix}{key}'; known keys in this section: "
                f"{', '.join(sorted(known))}"
            )
    kwargs = {}
    for key, value in values.items():
        expected = hints[key]
        if dataclasses.is_dataclass(expected):
            if not isinstance(value, dict):
                raise ConfigError(f"{prefix}{key} must be a section of keys, not {value!r}")
            kwargs[key] = _build(expected, value, f"{prefix}{key}.")
        else:
            kwargs[key] = _check_value(f"{prefix}{key}", value, expected)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as error:  # __post_init__ checks of a section
        raise ConfigError(f"{prefix.rstrip('.')}: {error}") from None


def apply_override(values: dict[str, Any], override: str) -> None:
    """Apply one ``section.key=value`` override; the value is read as YAML (200, 1e-3,
    true, null, [a, b] all mean what they say)."""
    if "=" not in override:
        raise ConfigError(f"override {override!r} must look like section.key=value")
    dotted, raw = override.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    parts = dotted.strip().split(".")
    node = values
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {override!r}: {part} is not a section")
    node[parts[-1]] = value


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML file (or start from the defaults), apply overrides, type-check."""
    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist; pass --config with a YAML "
                              "file such as configs/default.yaml")
        try:
            values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            raise ConfigError(f"config file {path} is not valid YAML{where}; fix it or "
                              "start from configs/default.yaml") from None
        if not isinstance(values, dict):
            raise ConfigError(f"config file {path} must hold sections of keys (data:, "
                              "model:, train:, ...)")
    for override in overrides or []:
        apply_override(values, override)
    return _build(Config, values, "")


def config_to_dict(config: Config) -> dict[str, Any]:
    return dataclasses.asdict(config)


def save_config(config: Config, path: Path) -> None:
    path.write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
