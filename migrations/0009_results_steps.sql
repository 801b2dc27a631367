-- A succeeded job keeps its handler's return value (JSON; SQL null when the
-- handler returned nothing). Written by the success settle, fenced like it.
alter table leasehold.jobs add column result jsonb;

-- Someone awaits this job's end (`waitForJob`): the settle or rescue that
-- ends it sends a notification. Jobs no one awaits send none, so the hot
-- path pays nothing for it.
alter table leasehold.jobs add column awaited boolean not null default false;

-- A sleeping job gives its attempt back like a release; its attempt row
-- says it slept.
alter type leasehold.attempt_outcome add value 'slept';

-- Each attempt's steps, in the order the handler reached them: name, whether
-- it was replayed from the record or run, and how long it took. Null for an
-- attempt that used no steps, and for one whose runner died (the step rows
-- name what it ran).
alter table leasehold.job_attempts add column steps jsonb;

-- Durable steps: one row per completed step of a job's generation, written
-- fenced by the lease token while the lease holds (invariant 14). `seq` is
-- the step's position in the handler's run; `attempt` the run that ran it.
-- Deleted with its job when the job is pruned.
create table leasehold.job_steps (
  job_id      bigint not null,
  generation  integer not null,
  seq         integer not null,
  name        text not null,
  result      jsonb,
  attempt     integer not null,
  duration_ms float8 not null,
  recorded_at timestamptz not null default now(),
  primary key (job_id, generation, seq)
);
