import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

// Holds <connect> read|write|semaphore <path> [permits]: acquires, prints "held", gives
// the hold back at the next line (or end) of stdin, prints "released".
// Holds <connect> latch <path> <id>: starts a LeaderLatch, prints "started", then
// "leader" and "notleader" as its leadership changes, and closes it at the next line (or
// end) of stdin, printing "released".
public class Holds {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 5000, new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("connected");
        if (args[1].equals("latch")) {
            LeaderLatch latch = new LeaderLatch(client, args[2], args[3]);
            latch.addListener(new LeaderLatchListener() {
                public void isLeader() { System.out.println("leader"); }
                public void notLeader() { System.out.println("notleader"); }
            });
            latch.start();
            System.out.println("started");
            in.readLine();
            latch.close();
        } else if (args[1].equals("semaphore")) {
            InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(client, args[2], Integer.parseInt(args[3]));
            Lease lease = s.acquire();
            System.out.println("held " + lease.getNodeName());
            in.readLine();
            s.returnLease(lease);
        } else {
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, args[2]);
            InterProcessMutex m = args[1].equals("read") ? rw.readLock() : rw.writeLock();
            m.acquire();
            System.out.println("held");
            in.readLine();
            m.release();
        }
        System.out.println("released");
        client.close();
    }
}
