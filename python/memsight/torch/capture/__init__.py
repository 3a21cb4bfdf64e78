"""Recording what the CUDA allocator does, and writing it down: the recording
itself (record, dump, snapshot), tags and phase marks carried in the trace,
the native snapshot dumper and counter reader (built from ../native on first
use), and every rank's dump at one moment (rank_dumps).

The public names are re-exported by ``memsight.torch``; import them from there."""
