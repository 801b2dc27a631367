-- A job whose runner died while holding it may be the job that killed the
-- runner, or a bystander caught with it. When its next attempt is its last,
-- the rescuer marks it a suspect, and runners run a suspect alone (nothing
-- beside it): a job that kills its runner can cost a bystander at most its
-- earlier attempts, never its last one, and a run of deaths that were not
-- caused by a job (a deploy, a mass kill) does not serialize the retries.
-- A suspect that settles normally (fails or succeeds) is cleared.
alter table leasehold.jobs add column suspect boolean not null default false;

create index jobs_suspect_idx on leasehold.jobs (queue, priority desc, run_at, id)
  where status = 'queued' and suspect;
