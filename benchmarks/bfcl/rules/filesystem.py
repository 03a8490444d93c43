"""GorillaFileSystem: what must exist (or must not) in the current directory."""

from __future__ import annotations

from typing import Any

from benchmarks.bfcl.rules.base import Pred, add


# -- GorillaFileSystem: every name is local to the current directory ---------------------------
def _entry(fs: Any, name: Any) -> Any:
    return fs._current_dir.contents.get(name) if isinstance(name, str) else None


def _is_file(fs: Any, name: Any) -> bool:
    return type(_entry(fs, name)).__name__ == "File"


def _is_dir(fs: Any, name: Any) -> bool:
    return type(_entry(fs, name)).__name__ == "Directory"


def _valid_name(name: str) -> bool:
    return not any(c in name for c in '|/\\?%*:"><')


def _cd_ok(instance: Any, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    if folder in (".", "/"):
        return True
    if folder == "..":
        return instance._current_dir.parent is not None
    return "/" not in folder and _is_dir(instance, folder)


def _path_ok(instance: Any, path: str | None) -> bool:
    if path in (None, ".", "/"):
        return True
    node = instance.root if path.startswith("/") else instance._current_dir
    for part in path.strip("/").split("/"):
        node = node.contents.get(part) if part != "." else node
        if type(node).__name__ != "Directory":
            return False
    return True


def _move_ok(instance: Any, source: str, destination: str) -> bool:
    """mv/cp: into an existing directory only if the name is free there; never over a file."""
    if "/" in destination:
        return False
    target = _entry(instance, destination)
    if target is None:
        return True
    return _is_dir(instance, destination) and source not in target.contents


FS = "GorillaFileSystem"
_file_exists = "the file must exist in the current directory"
for _tool in ("cat", "sort", "tail", "grep", "wc"):
    add(
        FS,
        _tool,
        ("file_exists", lambda instance, file_name: _is_file(instance, file_name), _file_exists),
    )
add(FS, "wc", ("wc_mode", lambda mode: mode in (None, "l", "w", "c"), "mode is l, w or c"))
add(
    FS,
    "diff",
    (
        "both_files_exist",
        lambda instance, file_name1, file_name2: (
            _is_file(instance, file_name1) and _is_file(instance, file_name2)
        ),
        "both files must exist here",
    ),
)
add(FS, "cd", ("folder_exists", _cd_ok, "the folder must be a subdirectory, '..' or '/'"))
add(FS, "find", ("path_exists", _path_ok, "the path must lead to a directory"))
for _tool in ("mv", "cp"):
    add(
        FS,
        _tool,
        (
            "source_exists",
            lambda instance, source: _entry(instance, source) is not None,
            "the source must exist in the current directory",
        ),
        (
            "destination_free",
            _move_ok,
            "the destination must be a new name or a directory without that name",
        ),
    )
add(
    FS,
    "rm",
    (
        "exists",
        lambda instance, file_name: _entry(instance, file_name) is not None,
        "nothing of that name in the current directory",
    ),
)
add(
    FS,
    "rmdir",
    (
        "empty_dir_exists",
        lambda instance, dir_name: (
            _is_dir(instance, dir_name) and not _entry(instance, dir_name).contents
        ),
        "must be an empty directory here",
    ),
)


def _name_free(arg: str) -> Pred:
    def pred(instance: Any, args: dict[str, Any]) -> bool:
        return _valid_name(args[arg]) and _entry(instance, args[arg]) is None

    return pred


for _tool, _arg in (("mkdir", "dir_name"), ("touch", "file_name")):
    add(FS, _tool, ("name_free", _name_free(_arg), "the name must be new and valid"))
add(
    FS,
    "echo",
    (
        "target_file_exists",
        lambda instance, file_name: (
            file_name is None or (_valid_name(file_name) and _is_file(instance, file_name))
        ),
        "echo writes only into an existing file",
    ),
)
add(FS, "mkdir", grounded=["dir_name"])
add(FS, "find", grounded=["name"])
for _tool in ("mv", "cp"):
    add(FS, _tool, grounded=["destination"])
