-- Debounce and throttle on enqueue, per key (issue 20).
--
-- Debounce: at most one job per (name, debounce key) that no runner has
-- claimed yet (queued, never run). The unique index below is the lock: an
-- enqueue that meets such a job updates it (the last enqueue's payload and
-- options, its start moved to the period after this enqueue, never past
-- `debounce_deadline`) instead of inserting a second one, and concurrent
-- enqueues of one key queue behind each other on that row. A claim takes
-- the job out of the index (`runs` goes up, the status leaves `queued`), so
-- the next enqueue starts a new job; a retry, a release or a sleep brings a
-- job back to `queued` with `runs` above 0, still out of the index.
alter table leasehold.jobs add column debounce_key text;
-- The latest start: the first enqueue of the job plus its maxWaitMs.
alter table leasehold.jobs add column debounce_deadline timestamptz;
create unique index jobs_debounce_idx on leasehold.jobs (name, debounce_key)
  where debounce_key is not null and status = 'queued' and runs = 0;

-- Throttle: one row per (name, throttle key), naming the job that stands in
-- the current window and when the window ends (its enqueue plus periodMs).
-- An enqueue upserts the row, which locks it: while the window is open the
-- row keeps its job and the enqueue returns that job, writing none; once it
-- has ended, the enqueue's own job takes the row and opens a new window.
-- Pruning deletes ended windows, and the windows of the jobs it deletes.
create table leasehold.throttle_windows (
  name           text not null,
  key            text not null,
  job_id         bigint not null,
  window_ends_at timestamptz not null,
  primary key (name, key)
);
create index throttle_windows_job_idx on leasehold.throttle_windows (job_id);
