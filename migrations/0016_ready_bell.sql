-- Runners waiting for work, by queue: the enqueues' bell. A runner whose
-- claim found its queues drained, with room for more, LISTENs on
-- leasehold_job_ready and writes a row here; an enqueue of a job due now
-- notifies that channel (payload: the schema-qualified queue) only while a
-- live row names the job's queue, so the commits of a queue nobody waits
-- on take no notify lock. The row expires unless its runner renews it: a
-- runner killed while waiting stops being rung within the expiry. A missed
-- notification costs latency, never a job: the runner still claims every
-- poll.
create table leasehold.listeners (
  runner_id   text primary key,
  queues      text[] not null,
  expires_at  timestamptz not null
);
