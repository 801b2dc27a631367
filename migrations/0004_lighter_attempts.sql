-- The hot path writes one attempt row per job. Three things made that dearer
-- than it needs to be, measured with `npm run bench`:
-- - the foreign key to jobs: a per-row trigger that looks the job up and
--   locks it again, for rows only the core writes, in the same statement that
--   updates that job. Pruning deletes attempts with their jobs instead.
-- - a surrogate id: a sequence and a primary key index per row, for rows
--   always read by job, in the order they ended.
-- - a btree on ended_at: attempts are appended in ended_at order, which is
--   what a BRIN index is for, at a fraction of the upkeep.
alter table leasehold.job_attempts drop constraint job_attempts_job_id_fkey;
alter table leasehold.job_attempts drop column id;
create index job_attempts_job_idx on leasehold.job_attempts (job_id);
drop index leasehold.job_attempts_ended_idx;
create index job_attempts_ended_brin on leasehold.job_attempts using brin (ended_at);
