"""kerntune.util: what scripts written for Kernel Tuner import from kernel_tuner.util.

The error markers a result carries under "__error__" when its configuration failed, and
get_config_string, which formats a result as Kernel Tuner prints it.
"""

__all__ = [
    "ErrorConfig",
    "InvalidConfig",
    "CompilationFailedConfig",
    "RuntimeFailedConfig",
    "IncorrectConfig",
    "TimeoutConfig",
    "get_config_string",
]


class ErrorConfig(str):
    """The marker of a configuration that failed (a str, so that results stay JSON)."""

    def __new__(cls, message=""):
        self = super().__new__(cls, cls.__name__)
        self.message = message  # kerntune's diagnostic: why it failed
        return self

    def __repr__(self):
        return type(self).__name__


class InvalidConfig(ErrorConfig):
    """Refused before it ran: a limit of the device (too many threads per block, too much
    shared memory), as Kernel Tuner marks configurations outside its restrictions."""


class CompilationFailedConfig(ErrorConfig):
    """The compiler refused it."""


class RuntimeFailedConfig(ErrorConfig):
    """Its launch failed, or it crashed its runner process."""


class IncorrectConfig(ErrorConfig):
    """Its output disagreed with the answer (Kernel Tuner stops the whole tuning there; kerntune
    disqualifies the configuration and goes on)."""


class TimeoutConfig(ErrorConfig):
    """It ran past kerntune's timeout and its runner process was stopped."""


def _compact(v):
    return "{:.3f}".format(round(v, 3)) if isinstance(v, float) else str(v)


def get_config_string(params, keys=None, units=None):
    """The result or configuration params as "name=value, name=value" (floats with three
    decimals), only the keys named (all by default), each followed by its unit from units."""
    keys = list(params.keys()) if not keys else keys
    items = []
    for k, v in params.items():
        if k not in keys:
            continue
        unit = units.get(k, "") if isinstance(units, dict) and not isinstance(v, ErrorConfig) else ""
        items.append(k + "=" + _compact(v) + unit)
    return ", ".join(items)
