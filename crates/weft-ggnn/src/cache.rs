//! The bounded search cache of GGNN's build searches (digest §3.2, §7 A20): a sorted best list,
//! a sorted bounded priority queue that drops its worst entry, and a FIFO visited ring. A
//! candidate is skipped while its id is anywhere in the three; membership is a per-thread count
//! array indexed by id, so a check is O(1) and nothing is allocated per search.

use weft_core::NodeId;

/// Best list + priority queue + visited ring, all bounded.
pub(crate) struct Cache {
    best: Vec<(f32, NodeId)>,
    best_cap: usize,
    prioq: Vec<(f32, NodeId)>,
    prioq_cap: usize,
    visited: Vec<NodeId>,
    visited_cap: usize,
    visited_head: usize,
    /// `present[id]`: how many of best, prioq and visited hold `id`.
    present: Vec<u16>,
}

impl Cache {
    /// A cache for ids below `n`.
    pub(crate) fn new(n: usize, best_cap: usize, prioq_cap: usize, visited_cap: usize) -> Self {
        Cache {
            best: Vec::with_capacity(best_cap + 1),
            best_cap,
            prioq: Vec::with_capacity(prioq_cap + 1),
            prioq_cap,
            visited: Vec::with_capacity(visited_cap),
            visited_cap,
            visited_head: 0,
            present: vec![0; n],
        }
    }

    /// Changes the capacities (the contents must be empty) and makes room for ids below `n`.
    pub(crate) fn configure(&mut self, n: usize, best: usize, prioq: usize, visited: usize) {
        debug_assert!(self.best.is_empty() && self.prioq.is_empty() && self.visited.is_empty());
        if self.present.len() < n {
            self.present.resize(n, 0);
        }
        self.best_cap = best;
        self.prioq_cap = prioq;
        self.visited_cap = visited;
    }

    /// Empties every region.
    pub(crate) fn reset(&mut self) {
        for &(_, id) in self.best.iter().chain(&self.prioq) {
            self.present[id as usize] -= 1;
        }
        for &id in &self.visited {
            self.present[id as usize] -= 1;
        }
        self.best.clear();
        self.prioq.clear();
        self.visited.clear();
        self.visited_head = 0;
    }

    /// Whether `id` is in the best list, the queue or the visited ring.
    #[inline]
    pub(crate) fn contains(&self, id: NodeId) -> bool {
        self.present[id as usize] > 0
    }

    /// The sorted best list.
    pub(crate) fn best(&self) -> &[(f32, NodeId)] {
        &self.best
    }

    /// The worst distance of a full best list, infinity while it is not full.
    #[inline]
    pub(crate) fn best_last(&self) -> f32 {
        if self.best.len() < self.best_cap {
            f32::INFINITY
        } else {
            self.best[self.best_cap - 1].0
        }
    }

    /// The best distance so far (infinity when empty).
    #[inline]
    pub(crate) fn best_first(&self) -> f32 {
        self.best.first().map_or(f32::INFINITY, |e| e.0)
    }

    /// Inserts into a sorted bounded list (before equal distances), dropping the worst when full.
    #[inline]
    fn insert(list: &mut Vec<(f32, NodeId)>, cap: usize, present: &mut [u16], d: f32, id: NodeId) {
        let pos = list.partition_point(|e| e.0 < d);
        if pos >= cap {
            return;
        }
        list.insert(pos, (d, id));
        present[id as usize] += 1;
        if list.len() > cap
            && let Some((_, out)) = list.pop()
        {
            present[out as usize] -= 1;
        }
    }

    /// Pushes `(d, id)` into both the best list and the queue (each drops its worst when full).
    #[inline]
    pub(crate) fn push(&mut self, id: NodeId, d: f32) {
        Self::insert(&mut self.best, self.best_cap, &mut self.present, d, id);
        Self::insert(&mut self.prioq, self.prioq_cap, &mut self.present, d, id);
    }

    /// Pops the queue's head if its distance is below `crit`, recording it as visited (the
    /// ring overwrites its oldest entry when full).
    #[inline]
    pub(crate) fn pop(&mut self, crit: f32) -> Option<NodeId> {
        let &(d, id) = self.prioq.first()?;
        if d.partial_cmp(&crit) != Some(std::cmp::Ordering::Less) {
            return None;
        }
        self.prioq.remove(0);
        self.present[id as usize] -= 1;
        if self.visited_cap > 0 {
            if self.visited.len() < self.visited_cap {
                self.visited.push(id);
            } else {
                let old = std::mem::replace(&mut self.visited[self.visited_head], id);
                self.present[old as usize] -= 1;
                self.visited_head = (self.visited_head + 1) % self.visited_cap;
            }
            self.present[id as usize] += 1;
        }
        Some(id)
    }

    /// Moves to the layer below: maps the best ids through `down`, reseeds the queue with the
    /// (mapped) best list and clears the visited ring; distances are kept.
    pub(crate) fn transform(&mut self, down: impl Fn(NodeId) -> NodeId) {
        for &(_, id) in &self.best {
            self.present[id as usize] -= 1;
        }
        let mut best = std::mem::take(&mut self.best);
        self.reset();
        for e in best.iter_mut() {
            e.1 = down(e.1);
        }
        for &(d, id) in &best {
            self.present[id as usize] += 1;
            if self.prioq.len() < self.prioq_cap {
                self.prioq.push((d, id));
                self.present[id as usize] += 1;
            }
        }
        self.best = best;
    }
}
