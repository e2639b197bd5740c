"""Where an index lives and how it is written: the index folder's layout and atomic
writes, what Strata owns on disk, the build lock, the LanceDB tables read a batch at
a time, and object stores (one client, obstore: the published mirror, the build's
lease and the build folder kept on a store)."""
