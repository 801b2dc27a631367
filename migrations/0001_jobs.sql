-- Leasehold's schema. Every object lives in the `leasehold` schema; the
-- migrator replaces that name with the configured one.

create type leasehold.job_status as enum ('queued', 'running', 'succeeded', 'dead', 'cancelled');
create type leasehold.attempt_outcome as enum ('succeeded', 'failed', 'timeout', 'lease_expired', 'released');

create table leasehold.jobs (
  id               bigint generated always as identity primary key,
  queue            text not null,
  name             text not null,
  payload          jsonb not null,
  status           leasehold.job_status not null default 'queued',
  -- Higher runs first.
  priority         smallint not null default 0,
  run_at           timestamptz not null default now(),
  -- Raised by the claim, never by a settle (invariant 1).
  attempts         integer not null default 0,
  max_attempts     integer not null check (max_attempts >= 1),
  lease_ms         integer not null check (lease_ms > 0),
  backoff_ms       integer not null check (backoff_ms >= 0),
  lease_token      uuid,
  lease_expires_at timestamptz,
  runner_id        text,
  group_key        text,
  dedupe_key       text,
  last_error       text,
  created_at       timestamptz not null default now(),
  started_at       timestamptz,
  finished_at      timestamptz,
  constraint jobs_running_has_lease check (
    status <> 'running' or (lease_token is not null and lease_expires_at is not null)
  )
);

-- The claim: an ordered index scan over ready jobs only, whatever the backlog.
create index jobs_ready_idx on leasehold.jobs (queue, priority desc, run_at, id)
  where status = 'queued';

-- The rescuer: running jobs by lease expiry.
create index jobs_lease_idx on leasehold.jobs (lease_expires_at)
  where status = 'running';

-- Dedupe: one pending job per (name, key).
create unique index jobs_dedupe_idx on leasehold.jobs (name, dedupe_key)
  where dedupe_key is not null and status in ('queued', 'running');

-- The dead-jobs view, and pruning of finished jobs. Partial, so the hot path
-- (queued -> running -> succeeded) writes no entry here but the last one.
create index jobs_dead_idx on leasehold.jobs (queue, id) where status = 'dead';
create index jobs_finished_idx on leasehold.jobs (finished_at)
  where status in ('succeeded', 'dead', 'cancelled');

create table leasehold.job_attempts (
  id         bigint generated always as identity primary key,
  job_id     bigint not null references leasehold.jobs (id) on delete cascade,
  attempt    integer not null,
  runner_id  text,
  claimed_at timestamptz not null,
  ended_at   timestamptz not null,
  outcome    leasehold.attempt_outcome not null,
  error      text
);

create index job_attempts_job_idx on leasehold.job_attempts (job_id, id);
