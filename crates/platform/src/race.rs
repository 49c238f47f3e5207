//! Waiting for whichever of two things happens first: a completion or a timeout, a command
//! or the news that its path is down.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::task::Poll;

thread_local! {
    /// How many [`race`]s are polling their futures on this thread now.
    static RACING: Cell<u32> = const { Cell::new(0) };
}

/// Whether a [`race`] is polling its futures on this thread now: what they do may lose to
/// the other one, so none may let time pass in place ([`crate::Clock::spend`]).
#[inline]
pub fn racing() -> bool {
    RACING.with(|r| r.get() > 0)
}

/// Counts a race's poll of its futures while it lives (see [`racing`]).
struct Racing;

impl Racing {
    fn enter() -> Racing {
        RACING.with(|r| r.set(r.get() + 1));
        Racing
    }
}

impl Drop for Racing {
    fn drop(&mut self) {
        RACING.with(|r| r.set(r.get() - 1));
    }
}

/// Which of two futures finished first, with its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Either<A, B> {
    /// The first.
    Left(A),
    /// The second.
    Right(B),
}

/// Runs `a` and `b` together and resolves with the first to finish (`a` on a tie); the
/// other is dropped.
pub async fn race<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    poll_fn(|cx| {
        let _racing = Racing::enter();
        if let Poll::Ready(x) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(x));
        }
        if let Poll::Ready(y) = b.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(y));
        }
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Waker};

    fn now<F: Future>(f: F) -> Poll<F::Output> {
        let mut f = std::pin::pin!(f);
        f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_ready_one_wins_and_the_first_wins_a_tie() {
        let pending = std::future::pending::<u8>;
        assert_eq!(
            now(race(pending(), async { 2 })),
            Poll::Ready(Either::Right(2))
        );
        assert_eq!(
            now(race(async { 1 }, pending())),
            Poll::Ready(Either::Left(1))
        );
        assert_eq!(
            now(race(async { 1 }, async { 2 })),
            Poll::Ready(Either::Left(1))
        );
        assert_eq!(now(race(pending(), pending())), Poll::Pending);
    }

    #[test]
    fn both_futures_are_polled_as_racing_and_nothing_else_is() {
        let seen = std::cell::RefCell::new(Vec::new());
        let look = |name: &'static str| {
            let seen = &seen;
            async move {
                seen.borrow_mut().push((name, racing()));
                std::future::pending::<()>().await;
            }
        };
        assert!(!racing());
        assert_eq!(now(race(look("a"), look("b"))), Poll::Pending);
        assert!(!racing(), "not after the race's poll");
        let inner = async {
            let nested = now(race(look("nested"), std::future::pending::<()>()));
            assert_eq!(nested, Poll::Pending);
            seen.borrow_mut().push(("after the nested race", racing()));
            std::future::pending::<()>().await;
        };
        assert_eq!(
            now(race(inner, std::future::pending::<()>())),
            Poll::Pending
        );
        assert!(!racing());
        assert_eq!(
            *seen.borrow(),
            [
                ("a", true),
                ("b", true),
                ("nested", true),
                ("after the nested race", true)
            ]
        );
    }
}
