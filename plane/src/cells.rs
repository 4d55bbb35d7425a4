//! Cell storage: dense pages while the joint is small, sparse above.
