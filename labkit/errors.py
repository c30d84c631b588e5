"""The errors labkit raises. Each message names the constraint that was violated."""


class LabkitError(Exception):
    """Base class: bad input or an unusable environment, never a bug of the caller's session."""


class NoGPUError(LabkitError):
    pass


class ConfigError(LabkitError, ValueError):
    """Unknown op / variant / dtype, bad shape, bad vector width, bad tensor."""


class CompileError(LabkitError):
    """nvcc failed. `file`, `line` and `message` point at the first error."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None, log: str = ""):
        self.file, self.line, self.message, self.log = file, line, message, log
        where = f"{file}:{line}: " if file else ""
        super().__init__(f"{where}{message}")


class ToolMissingError(LabkitError):
    pass


class LaunchError(LabkitError):
    """A launcher returned a CUDA error (`code`); the message names the op, variant and error."""

    def __init__(self, message: str, code: int | None = None):
        self.code = code
        super().__init__(message)


class BuildError(LabkitError):
    """A build could not be made or loaded (a lock held too long, a library that will not load)."""


class ToolTimeoutError(LabkitError):
    """An external program (nvcc, cuobjdump, nsys, ncu, ...) ran past its timeout; its process group
    was killed. `tool`, `argv` and `timeout_s` say which, what and how long."""

    def __init__(self, message: str, tool: str, argv: list, timeout_s: float):
        self.tool, self.argv, self.timeout_s = tool, argv, timeout_s
        super().__init__(message)
