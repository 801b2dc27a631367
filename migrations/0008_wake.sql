-- Idle costs nothing: when no job is ready or running, the scheduler asks
-- one question before it sleeps or arms a one-time EventBridge schedule —
-- when does something next come due? Queued jobs by run_at (a delayed job,
-- a retry after backoff) answer it from this index; running jobs by lease
-- expiry from jobs_lease_idx.
create index jobs_queued_run_at_idx on leasehold.jobs (run_at) where status = 'queued';

-- Recurring jobs: one row per (recurring job, tick) that was enqueued. The
-- insert and the enqueue share a transaction, and a second insert of the same
-- tick does nothing: a tick delivered twice, or seen by two schedulers, or
-- replayed across a deploy, enqueues exactly once.
create table leasehold.recurring_ticks (
  name        text not null,
  tick_at     timestamptz not null,
  job_id      bigint,
  enqueued_at timestamptz not null default now(),
  primary key (name, tick_at)
);

-- The one scheduler invocation sleeping toward the next due time, so that a
-- burst of wake-ups leaves one sleeper, not one each. A sleeper takes the row
-- when it is free (its watcher's invocation is over), when it is its own, or
-- when it watches a later time; otherwise another invocation already covers
-- the due time and this one returns.
create table leasehold.wake_watch (
  id          integer primary key check (id = 1),
  owner       text not null,
  due_at      timestamptz not null,
  watch_until timestamptz not null
);
