"""Workshop mode: one GPU box measures for a room of attendees (`labkit serve`; attendees call
labkit.connect, labkit.remote), on Dask distributed: no scheduler or sockets of labkit's own.

* server: `labkit serve` starts a Dask scheduler and one dask-cuda worker per GPU (one thread each, so
  two timings never overlap on a GPU; a nanny replaces a worker that faulted), all speaking mutual
  TLS with a key derived from the access token (labkit.remote.security), and the board's web page;
* dispatch + queue: attendees' requests queued per attendee, round-robin, with a per-request sampling
  budget; places and expected waits published to the attendees; inline kernels built on the box's
  CPUs before they queue (one build cache on the box, written only by the serve user);
* guard: before each timed configuration the worker waits for a quiet GPU (no other process, below
  the temperature limit, no clock slowdown) or marks the row; rows of shipped variants and torch are
  reused for `--reuse` seconds (an attendee's own kernel is always timed);
* board + web: per exercise and attendee: correct or not, time, verdict against torch and the
  shipped variants, updated as rows arrive.

Row fields added on the server (besides labkit.runner's):
    attendee              the name the attendee chose
    serve_request         the request's id (one request = one group: a torch baseline and its variants)
    queue_seq             the request's place in the dispatch order (1 = dispatched first)
    queue_seq_at_arrival  how many requests had been dispatched when it arrived
    queue_wait_s          seconds from arriving in the queue to being handed to a GPU worker
    serve_build_s         seconds the box spent building its inline kernels before it queued
    gpu_check, gpu_check_wait_s, gpu_other_procs, gpu_temp_c, gpu_slowdown   (labkit.serve.guard)
    reused_s              a shipped variant's or torch's row reused from this worker's earlier timing
                          under the same rule (`--reuse`): its age in seconds (absent: timed for it)
and on the attendee's side (labkit.remote): turnaround_s, seconds from sending the request to the row.
"""
