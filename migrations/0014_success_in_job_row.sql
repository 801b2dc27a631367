-- A success's attempt is recorded by its job row. Every field its attempt row
-- repeated is on the succeeded job, written by the same statement: the run
-- (runs), the generation, the runner, the claim (started_at) and the end
-- (finished_at). The row cost each job a heap tuple, an index entry and 175
-- bytes of WAL (16 % of a job's; bench/budget-probe.ts). A success that ran
-- steps still writes its row, which carries the step log.
--
-- Readers take every attempt from this view: the rows written, and for a
-- succeeded job without one, the row its job stands for. It shows the same
-- history as before: a success's row held exactly these values.
create view leasehold.attempts as
  select a.job_id, a.attempt, a.generation, a.runner_id, a.claimed_at, a.ended_at, a.outcome, a.error, a.steps
  from leasehold.job_attempts a
  union all
  select j.id, j.runs, j.generation, j.runner_id, j.started_at, j.finished_at,
         'succeeded'::leasehold.attempt_outcome, null::text, null::jsonb
  from leasehold.jobs j
  where j.status = 'succeeded'
    and not exists (select 1 from leasehold.job_attempts a
                    where a.job_id = j.id and a.generation = j.generation and a.attempt = j.runs);
