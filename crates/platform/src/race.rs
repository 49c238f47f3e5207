//! Waiting for whichever of two things happens first: a completion or a timeout, a command
//! or the news that its path is down.

use std::future::{poll_fn, Future};
use std::task::Poll;

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
}
