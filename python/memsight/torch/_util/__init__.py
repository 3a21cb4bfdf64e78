"""Private helpers shared by the rooms of ``memsight.torch``: torch and CUDA
looked up lazily (cuda), the process's rank and world (dist), files written
whole or not at all (atomic)."""
