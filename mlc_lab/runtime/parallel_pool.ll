; mlc_lab's pool of worker threads for the parallel loops of compiled CPU code (see parallel.py).
; @PAUSE@ and @NOW@ are filled in for the host: a spin-wait hint, and a cycle counter or 0.
;
; One job at a time: mlc_parallel_for publishes it under a new generation in @ticket (generation
; in the high 32 bits, next unclaimed chunk in the low 32), and every thread, the caller
; included, claims chunks with a compare-and-swap that checks the generation. The caller does
; every chunk nobody else claimed, and waits only for chunks other threads have claimed: a
; worker the system has not scheduled yet costs nothing, so a busy machine slows a loop down to
; one core's speed, never below it.

@ticket = internal global i64 0
@body = internal global ptr null
@closure = internal global ptr null
@extent = internal global i64 0
@chunks = internal global i64 0
@done = internal global i64 0
@status = internal global i32 0
@seats = internal global i32 0
@busy = internal global i32 0
@mlc_pool_sleepers = global i32 0
@mlc_pool_workers = global i32 0       ; worker threads started (set by parallel.py)
@mlc_pool_default = global i32 1       ; threads when the code asks for 0 (every core)
@mlc_pool_mutex = global ptr null      ; pthread_mutex_t and pthread_cond_t, made by parallel.py
@mlc_pool_cond = global ptr null
@mlc_chunk_hook = global ptr null

declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)
declare i32 @pthread_cond_wait(ptr, ptr)
declare i32 @pthread_cond_broadcast(ptr)
declare i32 @sched_yield()
@DECLARE@

define internal i1 @spun_enough(i64 %i, i64 %start) {
  %now = @NOW@
  %elapsed = sub i64 %now, %start
  %cycles = icmp uge i64 %elapsed, @SPIN_CYCLES@
  %iters = icmp uge i64 %i, @SPIN_ITERS@
  %over = or i1 %cycles, %iters
  ret i1 %over
}

; Run one chunk: the hook first when set (a debugging aid), then the body.
define internal i32 @run_one(ptr %fn, i64 %lo, i64 %hi, ptr %env) {
entry:
  %hook = load atomic ptr, ptr @mlc_chunk_hook monotonic, align 8
  %has_hook = icmp ne ptr %hook, null
  br i1 %has_hook, label %call_hook, label %call_body
call_hook:
  %hook.status = call i32 %hook(i64 %lo, i64 %hi)
  %hook.ok = icmp eq i32 %hook.status, 0
  br i1 %hook.ok, label %call_body, label %out
call_body:
  %body.status = call i32 %fn(i64 %lo, i64 %hi, ptr %env)
  ret i32 %body.status
out:
  ret i32 %hook.status
}

; Claim and run chunks of job %gen until none is left (or another job has begun).
define internal void @run_chunks(i64 %gen) {
entry:
  br label %claim
claim:
  %t = load atomic i64, ptr @ticket acquire, align 8
  %g = lshr i64 %t, 32
  %same = icmp eq i64 %g, %gen
  br i1 %same, label %check, label %out
check:
  %index = and i64 %t, 4294967295
  %n = load atomic i64, ptr @chunks monotonic, align 8
  %left = icmp ult i64 %index, %n
  br i1 %left, label %take, label %out
take:
  %t1 = add i64 %t, 1
  %pair = cmpxchg ptr @ticket, i64 %t, i64 %t1 acq_rel acquire
  %won = extractvalue { i64, i1 } %pair, 1
  br i1 %won, label %run, label %claim
run:
  %fn = load atomic ptr, ptr @body monotonic, align 8
  %env = load atomic ptr, ptr @closure monotonic, align 8
  %extent = load atomic i64, ptr @extent monotonic, align 8
  %lo.x = mul i64 %extent, %index
  %lo = udiv i64 %lo.x, %n
  %next = add i64 %index, 1
  %hi.x = mul i64 %extent, %next
  %hi = udiv i64 %hi.x, %n
  %st = call i32 @run_one(ptr %fn, i64 %lo, i64 %hi, ptr %env)
  %ok = icmp eq i32 %st, 0
  br i1 %ok, label %finished, label %failed
failed:
  %old = cmpxchg ptr @status, i32 0, i32 %st seq_cst seq_cst
  br label %finished
finished:
  %d = atomicrmw add ptr @done, i64 1 release
  br label %claim
out:
  ret void
}

; A worker thread: wait for a job of a new generation (spinning a little, then asleep), take a
; seat if the job has one left, run chunks; forever.
define void @mlc_pool_worker() {
entry:
  br label %wait
wait:
  %seen = phi i64 [ 0, %entry ], [ %gen, %joined ]
  %start = @NOW@
  br label %spin
spin:
  %i = phi i64 [ 0, %wait ], [ %i1, %again ]
  %t = load atomic i64, ptr @ticket acquire, align 8
  %g = lshr i64 %t, 32
  %new = icmp ne i64 %g, %seen
  br i1 %new, label %join, label %again
again:
  @PAUSE@
  %i1 = add i64 %i, 1
  %over = call i1 @spun_enough(i64 %i1, i64 %start)
  br i1 %over, label %sleep, label %spin
sleep:
  %mutex = load ptr, ptr @mlc_pool_mutex
  %cond = load ptr, ptr @mlc_pool_cond
  %l = call i32 @pthread_mutex_lock(ptr %mutex)
  %s0 = atomicrmw add ptr @mlc_pool_sleepers, i32 1 seq_cst
  br label %recheck
recheck:
  %t2 = load atomic i64, ptr @ticket seq_cst, align 8
  %g2 = lshr i64 %t2, 32
  %new2 = icmp ne i64 %g2, %seen
  br i1 %new2, label %woken, label %block
block:
  %w = call i32 @pthread_cond_wait(ptr %cond, ptr %mutex)
  br label %recheck
woken:
  %s1 = atomicrmw sub ptr @mlc_pool_sleepers, i32 1 seq_cst
  %u = call i32 @pthread_mutex_unlock(ptr %mutex)
  br label %join
join:
  %gen = phi i64 [ %g, %spin ], [ %g2, %woken ]
  %seat = atomicrmw sub ptr @seats, i32 1 acq_rel
  %has_seat = icmp sgt i32 %seat, 0
  br i1 %has_seat, label %work, label %joined
work:
  call void @run_chunks(i64 %gen)
  br label %joined
joined:
  br label %wait
}

; i32 mlc_parallel_for(ptr body, i64 extent, ptr closure, i32 threads): run body over [0, extent)
; in chunks on up to `threads` threads (0: the default); the first failing status, else 0.
define i32 @mlc_parallel_for(ptr %fn, i64 %extent, ptr %env, i32 %threads) {
entry:
  %empty = icmp sle i64 %extent, 0
  br i1 %empty, label %nothing, label %size
nothing:
  ret i32 0
size:
  %asked0 = icmp eq i32 %threads, 0
  %default = load i32, ptr @mlc_pool_default
  %asked = select i1 %asked0, i32 %default, i32 %threads
  %workers = load atomic i32, ptr @mlc_pool_workers monotonic, align 4
  %have = add i32 %workers, 1
  %fewer = icmp slt i32 %have, %asked
  %team = select i1 %fewer, i32 %have, i32 %asked
  %team64 = sext i32 %team to i64
  %alone = icmp sle i64 %team64, 1
  %one_iter = icmp sle i64 %extent, 1
  %serial = or i1 %alone, %one_iter
  br i1 %serial, label %by_self, label %lock
lock:
  %pair = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue { i32, i1 } %pair, 1
  br i1 %got, label %publish, label %by_self
by_self:   ; one thread, or the pool is running another caller's loop
  %self.status = call i32 @run_one(ptr %fn, i64 0, i64 %extent, ptr %env)
  ret i32 %self.status
publish:
  ; Close the last job's ticket first (its generation, no chunk left): a thread that read it
  ; before it ran out, and is only now trying to claim a chunk, fails its compare-and-swap
  ; instead of claiming a chunk of the new job under the old generation (which would run that
  ; chunk twice and count it twice in @done, so the loop below would never see @done == %n).
  %t0 = load atomic i64, ptr @ticket monotonic, align 8
  %closed = or i64 %t0, 4294967295
  store atomic i64 %closed, ptr @ticket seq_cst, align 8
  %want = mul i64 %team64, @CHUNKS_PER_THREAD@
  %more = icmp slt i64 %extent, %want
  %n = select i1 %more, i64 %extent, i64 %want
  store atomic ptr %fn, ptr @body monotonic, align 8
  store atomic ptr %env, ptr @closure monotonic, align 8
  store atomic i64 %extent, ptr @extent monotonic, align 8
  store atomic i64 %n, ptr @chunks monotonic, align 8
  store atomic i64 0, ptr @done monotonic, align 8
  store atomic i32 0, ptr @status monotonic, align 4
  %helpers = sub i32 %team, 1
  store atomic i32 %helpers, ptr @seats monotonic, align 4
  %t = load atomic i64, ptr @ticket monotonic, align 8
  %g = lshr i64 %t, 32
  %g1 = add i64 %g, 1
  %gen = and i64 %g1, 4294967295
  %t1 = shl i64 %gen, 32
  store atomic i64 %t1, ptr @ticket seq_cst, align 8
  %sleepers = load atomic i32, ptr @mlc_pool_sleepers seq_cst, align 4
  %any = icmp sgt i32 %sleepers, 0
  br i1 %any, label %wake, label %work
wake:
  %mutex = load ptr, ptr @mlc_pool_mutex
  %cond = load ptr, ptr @mlc_pool_cond
  %l = call i32 @pthread_mutex_lock(ptr %mutex)
  %b = call i32 @pthread_cond_broadcast(ptr %cond)
  %u = call i32 @pthread_mutex_unlock(ptr %mutex)
  br label %work
work:
  call void @run_chunks(i64 %gen)
  %start = @NOW@
  br label %wait
wait:
  %i = phi i64 [ 0, %work ], [ %i1, %pause ], [ %i1, %yield ]
  %d = load atomic i64, ptr @done acquire, align 8
  %all = icmp eq i64 %d, %n
  br i1 %all, label %finish, label %spin
spin:
  %i1 = add i64 %i, 1
  %over = call i1 @spun_enough(i64 %i1, i64 %start)
  br i1 %over, label %yield, label %pause
pause:
  @PAUSE@
  br label %wait
yield:
  %y = call i32 @sched_yield()
  br label %wait
finish:
  %st = load atomic i32, ptr @status seq_cst, align 4
  store atomic i32 0, ptr @busy release, align 4
  ret i32 %st
}
