# SPDX-License-Identifier: Apache-2.0
"""libcoll for Python. coll.distributed registers torch.distributed's
"coll" backend."""
