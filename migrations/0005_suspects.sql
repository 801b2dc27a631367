-- A job whose runner died while holding it is a suspect: it may be the job
-- that killed the runner, or a bystander. The rescuer marks it; runners run a
-- suspect alone (no other job beside it), so a job that kills its runner
-- takes no other job's attempt with it again. A suspect that settles normally
-- (fails or succeeds) is cleared.
alter table leasehold.jobs add column suspect boolean not null default false;

create index jobs_suspect_idx on leasehold.jobs (queue, priority desc, run_at, id)
  where status = 'queued' and suspect;
