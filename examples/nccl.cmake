# SPDX-License-Identifier: Apache-2.0
# multi_gpu_group: one process, every GPU, a group split into per-rank comms
# for worker threads. Needs the CUDA runtime, so only with the NCCL backend.
# With fewer than two GPUs it says so and exits 77 (skipped).
if(COLL_HAVE_NCCL AND TARGET CUDA::cudart)
  add_executable(multi_gpu_group ${CMAKE_CURRENT_LIST_DIR}/multi_gpu_group.c)
  target_link_libraries(multi_gpu_group PRIVATE coll CUDA::cudart Threads::Threads)
endif()
