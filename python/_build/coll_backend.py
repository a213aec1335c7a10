# SPDX-License-Identifier: Apache-2.0
"""coll_backend: a PEP 517 build backend in the standard library alone.

pip's build isolation would fetch setuptools from an index before building;
with `requires = []` and this backend the package builds offline. It writes
a pure-Python wheel of the `coll` folder (py3-none-any: the binding loads
libcoll.so at run time, it compiles nothing), an sdist, and an editable
wheel (PEP 660) that puts this folder on sys.path through a .pth file.
"""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "coll"
VERSION = "0.1.0"
SUMMARY = "Python binding of libcoll, collective communication for training"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIST_INFO = "%s-%s.dist-info" % (NAME, VERSION)
TAG = "py3-none-any"
# A fixed time for every archive entry, so two builds give the same bytes.
EPOCH = (2020, 1, 1, 0, 0, 0)


def _metadata():
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\nVersion: %s\nSummary: %s\n"
        "License: Apache-2.0\nRequires-Python: >=3.8\n" % (NAME, VERSION, SUMMARY)
    )


def _wheel_file():
    return (
        "Wheel-Version: 1.0\nGenerator: coll_backend\n"
        "Root-Is-Purelib: true\nTag: %s\n" % TAG
    )


def _package_files():
    """(path in the archive, path on disk) of the package's .py files;
    coll/distributed.py is included when it exists."""
    root = os.path.join(HERE, NAME)
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith(".py"):
                disk = os.path.join(dirpath, f)
                out.append((os.path.relpath(disk, HERE).replace(os.sep, "/"), disk))
    return out


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "%s,sha256=%s,%d\n" % (arcname, digest.decode(), len(data))


def _write_wheel(directory, entries):
    """entries: (arcname, bytes); the dist-info and RECORD are added."""
    name = "%s-%s-%s.whl" % (NAME, VERSION, TAG)
    entries = list(entries) + [
        (DIST_INFO + "/METADATA", _metadata().encode()),
        (DIST_INFO + "/WHEEL", _wheel_file().encode()),
    ]
    record = "".join(_record_line(a, d) for a, d in entries)
    record += DIST_INFO + "/RECORD,,\n"
    entries.append((DIST_INFO + "/RECORD", record.encode()))
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in entries:
            info = zipfile.ZipInfo(arcname, EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, DIST_INFO)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w") as f:
        f.write(_wheel_file())
    return DIST_INFO


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(a, _read(p)) for a, p in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = (HERE + "\n").encode()
    return _write_wheel(wheel_directory, [("_coll_editable.pth", pth)])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, VERSION)
    name = base + ".tar.gz"
    files = [("pyproject.toml", os.path.join(HERE, "pyproject.toml"))]
    files += [("_build/coll_backend.py", os.path.abspath(__file__))]
    files += _package_files()
    pkg_info = _metadata().encode()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for arcname, disk in files:
            data = _read(disk)
            info = tarfile.TarInfo("%s/%s" % (base, arcname))
            info.size, info.mode, info.mtime = len(data), 0o644, 1577836800
            t.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size, info.mode, info.mtime = len(pkg_info), 0o644, 1577836800
        t.addfile(info, io.BytesIO(pkg_info))
    return name
