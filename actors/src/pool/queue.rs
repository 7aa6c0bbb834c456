//! The pool's waiting line: highest priority first, first-come first-served among equals.
//!
//! Every entry carries a sequence number fixed at first submission. A job that is put back
//! after its worker crashed keeps that number, so it returns to the head of its priority
//! class instead of queueing behind work submitted while it was running.
//!
//! Public so the scheduling model (`tmas bench schedule`) orders its pools exactly as the
//! runtime does.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Position of a job in the line; kept when the job is re-queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    pub priority: i64,
    pub seq: u64,
}

struct Entry<T> {
    ticket: Ticket,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.ticket == other.ticket
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    /// `BinaryHeap` pops the greatest: higher priority wins, then the older (smaller) seq.
    fn cmp(&self, other: &Self) -> Ordering {
        self.ticket
            .priority
            .cmp(&other.ticket.priority)
            .then_with(|| other.ticket.seq.cmp(&self.ticket.seq))
    }
}

/// Max-priority FIFO queue.
pub struct JobQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    next_seq: u64,
}

impl<T> Default for JobQueue<T> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<T> JobQueue<T> {
    /// Adds a new job behind every earlier job of the same priority.
    pub fn push(&mut self, priority: i64, item: T) -> Ticket {
        let ticket = Ticket {
            priority,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.heap.push(Entry { ticket, item });
        ticket
    }

    /// Puts a job back at the place its ticket gives it.
    pub fn requeue(&mut self, ticket: Ticket, item: T) {
        self.heap.push(Entry { ticket, item });
    }

    pub fn pop(&mut self) -> Option<(Ticket, T)> {
        self.heap.pop().map(|e| (e.ticket, e.item))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Empties the queue, in no particular order.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.heap.drain().map(|e| e.item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pop_all(q: &mut JobQueue<&'static str>) -> Vec<&'static str> {
        std::iter::from_fn(|| q.pop().map(|(_, v)| v)).collect()
    }

    #[test]
    fn equal_priorities_come_out_in_submission_order() {
        let mut q = JobQueue::default();
        for v in ["a", "b", "c", "d"] {
            q.push(0, v);
        }
        assert_eq!(pop_all(&mut q), ["a", "b", "c", "d"]);
    }

    #[test]
    fn higher_priority_first_then_fifo() {
        let mut q = JobQueue::default();
        q.push(0, "low1");
        q.push(5, "high1");
        q.push(-3, "lowest");
        q.push(5, "high2");
        q.push(0, "low2");
        assert_eq!(
            pop_all(&mut q),
            ["high1", "high2", "low1", "low2", "lowest"]
        );
    }

    #[test]
    fn requeued_job_keeps_its_place() {
        let mut q = JobQueue::default();
        q.push(0, "first");
        q.push(0, "second");
        let (ticket, first) = q.pop().unwrap();
        q.push(0, "third");
        q.requeue(ticket, first);
        assert_eq!(q.len(), 3);
        assert_eq!(pop_all(&mut q), ["first", "second", "third"]);
        assert!(q.is_empty());
    }
}
