# SPDX-License-Identifier: Apache-2.0
"""_lib: finds and loads libcoll.so, declares the C prototypes, checks the
version.

Where the library comes from, first match wins:
  1. COLL_LIBRARY, a path to libcoll.so (read by this package only);
  2. a libcoll.so.0 (or libcoll.so) beside this package's files;
  3. the CMake build tree, when the package is imported from the source
     tree (python/coll inside a checkout with include/coll.h): build/src/;
  4. the library directories of this interpreter's prefix (a virtual
     environment that libcoll was installed into: cmake --install build
     --prefix .venv);
  5. the installed library, as the loader finds it (its cache after
     ldconfig, LD_LIBRARY_PATH): ctypes.util.find_library("coll"),
     libcoll.so.0.

`path` is the file the loader mapped, found with dladdr() (or the
process's map when that fails), never a bare name: the torch backend's
module is looked up beside it.
"""
import ctypes
import ctypes.util
import os
import sys
import sysconfig

# The binding mirrors coll.h 0.1: any 0.x library from 0.1 on keeps what it
# declares (coll.h's compatibility promise), a 1.x library may not.
EXPECTED_MAJOR = 0
EXPECTED_MIN_VERSION = 100

c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_int64 = ctypes.c_int64
c_uint32 = ctypes.c_uint32
c_void_p = ctypes.c_void_p
c_float = ctypes.c_float
c_char_p = ctypes.c_char_p
P = ctypes.POINTER


class Buffer(ctypes.Structure):
    """coll_buffer_t: frozen for libcoll.so.0."""

    _fields_ = [("data", c_void_p), ("count", c_size_t), ("dtype", c_int)]


class CommConfig(ctypes.Structure):
    """coll_comm_config_t, field for field; start from init() (what
    COLL_COMM_CONFIG_INIT does in C), which sets size and magic."""

    _fields_ = [
        ("size", c_size_t),
        ("timeout_ms", c_int64),
        ("name", c_char_p),
        ("abort_handle", c_void_p),
        ("magic", ctypes.c_uint64),
    ]
    MAGIC = 0x31474643434C4F43  # COLL_COMM_CONFIG_MAGIC, "COLCCFG1"

    @classmethod
    def init(cls):
        return cls(ctypes.sizeof(cls), 0, None, None, cls.MAGIC)


def prefix_libdirs(prefix):
    """The directories a CMake install under `prefix` may put libraries in:
    lib, lib64 and Debian's multiarch lib/<triplet>."""
    dirs = [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join(prefix, "lib", multiarch))
    return dirs


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libcoll.so.0", "libcoll.so"):
        yield os.path.join(here, name)
    root = os.path.dirname(os.path.dirname(here))
    if os.path.isfile(os.path.join(root, "include", "coll.h")):
        yield os.path.join(root, "build", "src", "libcoll.so.0")
    if sys.prefix != sys.base_prefix:  # a virtual environment's own prefix
        for d in prefix_libdirs(sys.prefix):
            yield os.path.join(d, "libcoll.so.0")
    found = ctypes.util.find_library("coll")
    if found:
        yield found
    yield "libcoll.so.0"


def _open():
    path = os.environ.get("COLL_LIBRARY")
    if path:
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            raise ImportError(
                "coll: COLL_LIBRARY=%s cannot be loaded: %s" % (path, e)
            ) from e
    tried = []
    for cand in _candidates():
        if os.path.sep in cand and not os.path.exists(cand):
            continue
        try:
            return ctypes.CDLL(cand), cand
        except OSError as e:
            tried.append("%s (%s)" % (cand, e))
    raise ImportError(
        "coll: libcoll.so not found; set COLL_LIBRARY to its path, or install "
        "libcoll (tried: %s)" % "; ".join(tried or ["nothing"])
    )


# name: (restype, argtypes). Every function returning coll_status_t is
# declared to return c_int; the caller turns a non-zero value into an error.
_S = c_int
_PROTOTYPES = {
    "coll_version": (c_int, []),
    "coll_strerror": (c_char_p, [c_int]),
    "coll_status_name": (c_char_p, [c_int]),
    "coll_last_error": (c_char_p, []),
    "coll_dtype_size": (c_size_t, [c_int]),
    "coll_dtype_name": (c_char_p, [c_int]),
    "coll_op_name": (c_char_p, [c_int]),
    "coll_inproc_create": (_S, [c_int, P(c_void_p)]),
    "coll_transport_destroy": (None, [c_void_p]),
    "coll_comm_create": (_S, [c_void_p, P(CommConfig), P(c_void_p)]),
    "coll_comm_init_env": (_S, [P(CommConfig), P(c_void_p)]),
    "coll_comm_destroy": (_S, [c_void_p]),
    "coll_comm_rank": (c_int, [c_void_p]),
    "coll_comm_size": (c_int, [c_void_p]),
    "coll_comm_backend": (c_char_p, [c_void_p]),
    "coll_allreduce": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "coll_allreduce_batch": (_S, [c_void_p, P(Buffer), c_size_t, c_int, c_void_p]),
    "coll_allreduce_premul_sum": (_S, [c_void_p, P(Buffer), c_size_t, c_float, c_void_p]),
    "coll_broadcast": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "coll_allgather": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p]),
    "coll_reduce_scatter": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p]),
    "coll_reduce": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, c_void_p]),
    "coll_barrier": (_S, [c_void_p]),
    "coll_send": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_uint32]),
    "coll_recv": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_uint32, P(c_size_t)]),
    "coll_negotiate_dtype": (_S, [c_void_p, c_int, P(c_int)]),
    "coll_federated_average": (_S, [c_void_p, c_void_p, c_size_t, c_int64, P(c_int)]),
    "coll_iallreduce": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, P(c_void_p)]),
    "coll_iallreduce_batch": (_S, [c_void_p, P(Buffer), c_size_t, c_int, c_void_p, P(c_void_p)]),
    "coll_iallreduce_premul_sum": (_S, [c_void_p, P(Buffer), c_size_t, c_float, c_void_p, P(c_void_p)]),
    "coll_ibroadcast": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, P(c_void_p)]),
    "coll_iallgather": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_void_p, P(c_void_p)]),
    "coll_ireduce_scatter": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_void_p, P(c_void_p)]),
    "coll_ireduce": (_S, [c_void_p, c_void_p, c_void_p, c_size_t, c_int, c_int, c_int, c_void_p, P(c_void_p)]),
    "coll_ibarrier": (_S, [c_void_p, P(c_void_p)]),
    "coll_isend": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_uint32, P(c_void_p)]),
    "coll_irecv": (_S, [c_void_p, c_void_p, c_size_t, c_int, c_int, c_uint32, P(c_size_t), P(c_void_p)]),
    "coll_inegotiate_dtype": (_S, [c_void_p, c_int, P(c_int), P(c_void_p)]),
    "coll_ifederated_average": (_S, [c_void_p, c_void_p, c_size_t, c_int64, P(c_int), P(c_void_p)]),
    "coll_wait": (_S, [c_void_p]),
    "coll_test": (_S, [c_void_p, P(c_int)]),
    "coll_abort_handle_create": (_S, [P(c_void_p)]),
    "coll_comm_abort_handle": (_S, [c_void_p, P(c_void_p)]),
    "coll_abort": (_S, [c_void_p]),
    "coll_is_aborted": (c_int, [c_void_p]),
    "coll_abort_handle_release": (None, [c_void_p]),
}


def _declare(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as e:
            raise ImportError("coll: %s lacks %s" % (lib._name, name)) from e
        fn.restype = restype
        fn.argtypes = argtypes


def _check_version(lib, path):
    v = lib.coll_version()
    if v // 10000 != EXPECTED_MAJOR or v < EXPECTED_MIN_VERSION:
        raise ImportError(
            "coll: %s is libcoll %d.%d.%d; this package needs 0.x from 0.1 on"
            % (path, v // 10000, v // 100 % 100, v % 100)
        )
    return v


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", c_char_p),
        ("dli_fbase", c_void_p),
        ("dli_sname", c_char_p),
        ("dli_saddr", c_void_p),
    ]


def _mapped_file(lib, name):
    """The absolute path of the file that holds lib's function `coll_version`,
    as the loader mapped it: a library opened by a bare name (libcoll.so.0,
    found through the loader's cache or LD_LIBRARY_PATH) has no directory
    of its own in ctypes, and only the loader knows where it found it."""
    addr = ctypes.cast(lib.coll_version, c_void_p).value
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.restype = c_int
        dladdr.argtypes = [c_void_p, P(_DlInfo)]
        info = _DlInfo()
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            found = os.fsdecode(info.dli_fname)
            if os.path.isabs(found):
                return found
    except (OSError, AttributeError):
        pass
    try:  # the loader's map of this process: "start-end perms off dev inode path"
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].startswith("/"):
                    start, end = (int(x, 16) for x in fields[0].split("-"))
                    if start <= addr < end:
                        return fields[5].strip()
    except OSError:
        pass
    return os.path.abspath(name) if os.path.sep in name else name


def _load():
    lib, path = _open()
    _check_version_fn = getattr(lib, "coll_version", None)
    if _check_version_fn is None:
        raise ImportError("coll: %s is not libcoll (no coll_version)" % path)
    _check_version_fn.restype = c_int
    _check_version_fn.argtypes = []
    path = _mapped_file(lib, path)
    version = _check_version(lib, path)
    _declare(lib)
    return lib, path, version


lib, path, version = _load()


def last_error():
    """This thread's coll_last_error() text."""
    return lib.coll_last_error().decode("utf-8", "replace")
