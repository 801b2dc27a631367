-- A runner's death charges only the jobs whose handler had started
-- (invariant 1). The claim counts the attempt and clears `handler_started`;
-- the runner records each start in its next batched write (or, for a job
-- that owes an attempt, before the handler runs). The rescuer charges an
-- expired lease whose start was recorded, and gives the attempt back to one
-- whose start was not: the job sat in the runner's buffer, or started in the
-- last moments before the death.
alter table leasehold.jobs add column handler_started boolean not null default false;

-- A job given its attempt back after a death owes it: its next start is
-- recorded before its handler runs, and if that run dies too, the owed
-- attempt is charged with it. A job that kills its runner at once still
-- starts exactly max_attempts times.
alter table leasehold.jobs add column owes_attempt boolean not null default false;
-- Set with `owes_attempt`, but kept until the job settles: once a death has
-- been refunded, every later start of the job is recorded before it runs.
alter table leasehold.jobs add column start_first boolean not null default false;

-- Attempt numbers are unique for the life of a job: `runs` counts every
-- claim (a release or a refund gives the attempt back, never the number),
-- and a manual retry starts a new generation of the same job.
alter table leasehold.jobs add column runs integer not null default 0;
alter table leasehold.jobs add column generation integer not null default 1;
update leasehold.jobs j
set runs = greatest(j.attempts, coalesce((select max(a.attempt) from leasehold.job_attempts a where a.job_id = j.id), 0));
alter table leasehold.job_attempts add column generation integer not null default 1;
