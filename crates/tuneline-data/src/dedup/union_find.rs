//! Union-find over sample indices; the smallest index of a set is its root,
//! so the representative of a cluster is its first sample in input order.

/// Disjoint sets of `0..n`.
#[derive(Debug, Clone)]
pub struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    /// `n` singleton sets.
    pub fn new(n: usize) -> Self {
        Self { parent: (0..n).collect() }
    }

    /// The root (smallest member) of `x`'s set.
    pub fn find(&mut self, x: usize) -> usize {
        let mut root = x;
        while self.parent[root] != root {
            root = self.parent[root];
        }
        let mut node = x;
        while self.parent[node] != root {
            node = std::mem::replace(&mut self.parent[node], root);
        }
        root
    }

    /// Joins the sets of `a` and `b`.
    pub fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (small, large) = if ra < rb { (ra, rb) } else { (rb, ra) };
            self.parent[large] = small;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_smallest_member() {
        let mut uf = UnionFind::new(6);
        uf.union(4, 5);
        uf.union(5, 2);
        uf.union(1, 0);
        assert_eq!((uf.find(4), uf.find(5), uf.find(2)), (2, 2, 2));
        assert_eq!(uf.find(1), 0);
        assert_eq!(uf.find(3), 3);
    }
}
